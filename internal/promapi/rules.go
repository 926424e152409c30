package promapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/annotations"
)

// RuleSource is what /api/v1/rules and /api/v1/alerts list: the loaded rule groups and
// alerting rules (internal/promrules.Rules). Safe for concurrent use.
type RuleSource interface {
	Groups() []*rules.Group
	AlertingRules() []*rules.AlertingRule
}

// The answers of /api/v1/rules and /api/v1/alerts, in the shape of Prometheus's web/api/v1.

type alertsData struct {
	Alerts []*alertJSON `json:"alerts"`
}

type alertJSON struct {
	Labels          labels.Labels `json:"labels"`
	Annotations     labels.Labels `json:"annotations"`
	State           string        `json:"state"`
	ActiveAt        *time.Time    `json:"activeAt,omitempty"`
	KeepFiringSince *time.Time    `json:"keepFiringSince,omitempty"`
	Value           string        `json:"value"`
}

type rulesData struct {
	Groups []*ruleGroupJSON `json:"groups"`
}

type ruleGroupJSON struct {
	Name           string    `json:"name"`
	File           string    `json:"file"`
	Rules          []any     `json:"rules"`
	Interval       float64   `json:"interval"`
	Limit          int       `json:"limit"`
	EvaluationTime float64   `json:"evaluationTime"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

type alertingRuleJSON struct {
	State          string        `json:"state"`
	Name           string        `json:"name"`
	Query          string        `json:"query"`
	Duration       float64       `json:"duration"`
	KeepFiringFor  float64       `json:"keepFiringFor"`
	Labels         labels.Labels `json:"labels"`
	Annotations    labels.Labels `json:"annotations"`
	Alerts         []*alertJSON  `json:"alerts"`
	Health         string        `json:"health"`
	LastError      string        `json:"lastError,omitempty"`
	EvaluationTime float64       `json:"evaluationTime"`
	LastEvaluation time.Time     `json:"lastEvaluation"`
	Type           string        `json:"type"`
}

type recordingRuleJSON struct {
	Name           string        `json:"name"`
	Query          string        `json:"query"`
	Labels         labels.Labels `json:"labels,omitempty"`
	Health         string        `json:"health"`
	LastError      string        `json:"lastError,omitempty"`
	EvaluationTime float64       `json:"evaluationTime"`
	LastEvaluation time.Time     `json:"lastEvaluation"`
	Type           string        `json:"type"`
}

// alertsOf is the JSON of active alerts, pending and firing, as Prometheus lists them.
func alertsOf(as []*rules.Alert) []*alertJSON {
	out := make([]*alertJSON, 0, len(as))
	for _, a := range as {
		j := &alertJSON{
			Labels:      a.Labels,
			Annotations: a.Annotations,
			State:       a.State.String(),
			ActiveAt:    &a.ActiveAt,
			Value:       strconv.FormatFloat(a.Value, 'e', -1, 64),
		}
		if !a.KeepFiringSince.IsZero() {
			j.KeepFiringSince = &a.KeepFiringSince
		}
		out = append(out, j)
	}
	return out
}

func (h *Handler) alerts(*http.Request) (any, annotations.Annotations, *apiError) {
	out := alertsData{Alerts: []*alertJSON{}}
	if h.opt.Rules == nil {
		return out, nil, nil
	}
	for _, ar := range h.opt.Rules.AlertingRules() {
		out.Alerts = append(out.Alerts, alertsOf(ar.ActiveAlerts())...)
	}
	return out, nil, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// rules answers /api/v1/rules, with Prometheus's filters type (alert, record), rule_name[],
// rule_group[] and file[].
func (h *Handler) rules(r *http.Request) (any, annotations.Annotations, *apiError) {
	out := rulesData{Groups: []*ruleGroupJSON{}}
	typ := r.FormValue("type")
	if typ != "" && typ != "alert" && typ != "record" {
		return nil, nil, invalidParam(errors.New("not supported value "+strconv.Quote(typ)), "type")
	}
	in := func(name string, v string) bool {
		vs := r.Form[name]
		if len(vs) == 0 {
			return true
		}
		for _, x := range vs {
			if x == v {
				return true
			}
		}
		return false
	}
	if h.opt.Rules == nil {
		return out, nil, nil
	}
	for _, g := range h.opt.Rules.Groups() {
		if !in("rule_group[]", g.Name()) || !in("file[]", g.File()) {
			continue
		}
		gj := &ruleGroupJSON{
			Name:           g.Name(),
			File:           g.File(),
			Rules:          []any{},
			Interval:       g.Interval().Seconds(),
			Limit:          g.Limit(),
			EvaluationTime: g.GetEvaluationTime().Seconds(),
			LastEvaluation: g.GetLastEvaluation(),
		}
		for _, rl := range g.Rules() {
			if !in("rule_name[]", rl.Name()) {
				continue
			}
			switch rule := rl.(type) {
			case *rules.AlertingRule:
				if typ == "record" {
					continue
				}
				gj.Rules = append(gj.Rules, alertingRuleJSON{
					State:          rule.State().String(),
					Name:           rule.Name(),
					Query:          rule.Query().String(),
					Duration:       rule.HoldDuration().Seconds(),
					KeepFiringFor:  rule.KeepFiringFor().Seconds(),
					Labels:         rule.Labels(),
					Annotations:    rule.Annotations(),
					Alerts:         alertsOf(rule.ActiveAlerts()),
					Health:         string(rule.Health()),
					LastError:      errString(rule.LastError()),
					EvaluationTime: rule.GetEvaluationDuration().Seconds(),
					LastEvaluation: rule.GetEvaluationTimestamp(),
					Type:           "alerting",
				})
			case *rules.RecordingRule:
				if typ == "alert" {
					continue
				}
				gj.Rules = append(gj.Rules, recordingRuleJSON{
					Name:           rule.Name(),
					Query:          rule.Query().String(),
					Labels:         rule.Labels(),
					Health:         string(rule.Health()),
					LastError:      errString(rule.LastError()),
					EvaluationTime: rule.GetEvaluationDuration().Seconds(),
					LastEvaluation: rule.GetEvaluationTimestamp(),
					Type:           "recording",
				})
			}
		}
		if typ != "" && len(gj.Rules) == 0 {
			continue
		}
		out.Groups = append(out.Groups, gj)
	}
	return out, nil, nil
}
