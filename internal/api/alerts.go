package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/series"
)

// maxAlertsBody bounds a peer's /api/v1/alerts answer.
const maxAlertsBody = 8 << 20

// wireAlerts converts the engine's alerts to their wire type (apiwire.Alert): the same
// members, with NaN and ±Inf values written as strings instead of failing the answer.
func wireAlerts(as []alerts.Alert) []apiwire.Alert {
	out := make([]apiwire.Alert, len(as))
	for i, a := range as {
		out[i] = apiwire.Alert{Name: a.Name, State: a.State, Severity: a.Severity, Node: a.Node, Labels: a.Labels,
			Value: apiwire.StdFloat(a.Value), Op: a.Op, Threshold: apiwire.StdFloat(a.Threshold), SinceMs: a.SinceMs, Summary: a.Summary}
	}
	return out
}

// localAlerts returns this node's alerts as the caller in ctx may see them: the labels of an
// alert over a series it may not see are left out (the alert itself stays: that something
// fires is not the series' data).
func (s *Server) localAlerts(ctx context.Context) []apiwire.Alert {
	if s.Alerts == nil {
		return []apiwire.Alert{}
	}
	out := wireAlerts(s.Alerts().Alerts)
	visible := s.SeriesVisible(ctx)
	for i := range out {
		if visible != nil && !visible(out[i].Labels) {
			out[i].Labels = series.Labels{}
		}
	}
	return out
}

func (s *Server) alerts(w http.ResponseWriter, r *http.Request) {
	ans := apiwire.AlertsAnswer{Alerts: s.localAlerts(r.Context())}
	if s.Alerts != nil {
		ans.Truncated = s.Alerts().Truncated
	}
	WriteJSON(w, ans)
}

// clusterAlerts merges this node's alerts and every peer's, fetched in parallel from their
// /api/v1/alerts (a down or silent peer is listed unreachable, never waited for beyond
// ClusterTimeout plus 5 s). Each alert carries its node.
func (s *Server) clusterAlerts(w http.ResponseWriter, r *http.Request) {
	local := s.localAlerts(r.Context())
	ans := apiwire.AlertsAnswer{Alerts: local, Nodes: []apiwire.AlertsNode{{Node: s.NodeName, Status: "ok", Firing: firing(local)}}}
	if s.Cluster != nil {
		peerVisible := s.PeerSeriesVisible(r.Context())
		members := s.Cluster.Members()
		type result struct {
			node   apiwire.AlertsNode
			alerts []apiwire.Alert
		}
		rs := make([]result, len(members))
		ctx, cancel := context.WithTimeout(r.Context(), s.ClusterTimeout+5*time.Second)
		defer cancel()
		errs := hub.FanOut(ctx, members, maxHistoryFetches, func(ctx context.Context, i int, m hub.Member) error {
			as, err := s.fetchAlerts(ctx, m)
			if err != nil {
				return err
			}
			for j := range as {
				as[j].Node = m.Name
				if as[j].Labels == nil || peerVisible != nil && !peerVisible(as[j].Labels) {
					as[j].Labels = series.Labels{}
				}
			}
			rs[i].alerts = as
			rs[i].node.Firing = firing(as)
			return nil
		})
		for i, m := range members {
			rs[i].node.Node, rs[i].node.Status = m.Name, "ok"
			if errs[i] != nil {
				rs[i].node.Status, rs[i].node.Error = "unreachable", errs[i].Error()
			}
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].node.Node < rs[j].node.Node })
		for _, res := range rs {
			ans.Nodes = append(ans.Nodes, res.node)
			ans.Alerts = append(ans.Alerts, res.alerts...)
		}
		sort.SliceStable(ans.Alerts, func(i, j int) bool {
			return ans.Alerts[i].State == "firing" && ans.Alerts[j].State != "firing"
		})
	}
	WriteJSON(w, ans)
}

func firing(as []apiwire.Alert) int {
	n := 0
	for _, a := range as {
		if a.State == "firing" {
			n++
		}
	}
	return n
}

// fetchAlerts reads a peer's /api/v1/alerts.
func (s *Server) fetchAlerts(ctx context.Context, m hub.Member) ([]apiwire.Alert, error) {
	body, err := s.fetch().Get(ctx, m, "/api/v1/alerts", maxAlertsBody)
	var tooLarge hub.ErrTooLarge
	var status hub.StatusError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("alerts answer larger than %d bytes", maxAlertsBody)
	case errors.As(err, &status):
		return nil, fmt.Errorf("alerts: %s", status.Status)
	case err != nil:
		return nil, err
	}
	var a apiwire.AlertsAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("alerts answer: %w", err)
	}
	return a.Alerts, nil
}
