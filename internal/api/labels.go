package api

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// Limits of /api/v1/labels: the UI asks as a person types, so an answer is small and bounded.
const (
	labelsDefaultLimit = 50
	labelsMaxLimit     = 200
	labelsMaxQuery     = 128 // bytes of q
)

// LabelsAnswer is the /api/v1/labels answer: distinct metric names and label values (other
// than metric) of live series that contain the text, at most limit of each, sorted; truncated
// when more matched.
type LabelsAnswer struct {
	Metrics   []string     `json:"metrics"`
	Labels    []LabelValue `json:"labels"`
	Truncated bool         `json:"truncated"`
}

// LabelValue is one label key and value.
type LabelValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ParseLabelsQuery reads ?q=TEXT&limit=N: q is required, at most labelsMaxQuery bytes of valid
// UTF-8, matched case-insensitively; limit is 1..labelsMaxLimit (default labelsDefaultLimit).
func ParseLabelsQuery(r *http.Request) (q string, limit int, err error) {
	v := r.URL.Query()
	q = strings.TrimSpace(v.Get("q"))
	if q == "" {
		return "", 0, fmt.Errorf("missing q: the text to look for in metric names and label values")
	}
	if len(q) > labelsMaxQuery || !utf8.ValidString(q) {
		return "", 0, fmt.Errorf("bad q: at most %d bytes of UTF-8", labelsMaxQuery)
	}
	limit = labelsDefaultLimit
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > labelsMaxLimit {
			return "", 0, fmt.Errorf("bad limit %.20q: want 1 to %d", s, labelsMaxLimit)
		}
		limit = n
	}
	return strings.ToLower(q), limit, nil
}

// labels answers GET /api/v1/labels?q=TEXT[&limit=N] (the UI's search suggestions) with the
// caller's visible series only (SeriesVisible). One pass over the view's live series
// (registry.View.EachLive: not the dead ones kept), stopping once both lists are full; lower-casing allocates only for values that are not ASCII-lower.
func (s *Server) labels(w http.ResponseWriter, r *http.Request) {
	q, limit, err := ParseLabelsQuery(r)
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	WriteJSON(w, FindLabels(s.Registry.View(), s.SeriesVisible(r.Context()), q, limit))
}

// FindLabels collects the answer from the live series of view; visible (nil: all) filters
// them; q must be lower-case.
func FindLabels(view *registry.View, visible func(series.Labels) bool, q string, limit int) LabelsAnswer {
	metrics := map[string]struct{}{}
	values := map[LabelValue]struct{}{}
	ans := LabelsAnswer{Metrics: []string{}, Labels: []LabelValue{}}
	view.EachLive(func(h registry.Handle) bool {
		l := h.Labels()
		if visible != nil && !visible(l) {
			return true
		}
		for k, v := range l {
			if !containsFold(v, q) {
				continue
			}
			if k == "metric" {
				if _, ok := metrics[v]; !ok {
					if len(metrics) >= limit {
						ans.Truncated = true
						continue
					}
					metrics[v] = struct{}{}
				}
				continue
			}
			lv := LabelValue{k, v}
			if _, ok := values[lv]; !ok {
				if len(values) >= limit {
					ans.Truncated = true
					continue
				}
				values[lv] = struct{}{}
			}
		}
		return !(ans.Truncated && len(metrics) >= limit && len(values) >= limit)
	})
	for m := range metrics {
		ans.Metrics = append(ans.Metrics, m)
	}
	sort.Strings(ans.Metrics)
	for lv := range values {
		ans.Labels = append(ans.Labels, lv)
	}
	sort.Slice(ans.Labels, func(i, j int) bool {
		a, b := ans.Labels[i], ans.Labels[j]
		return a.Key < b.Key || a.Key == b.Key && a.Value < b.Value
	})
	return ans
}

// containsFold reports whether s contains the lower-case q, ignoring case.
func containsFold(s, q string) bool {
	if len(s) < len(q) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return strings.Contains(strings.ToLower(s), q)
		}
	}
	return strings.Contains(s, q)
}
