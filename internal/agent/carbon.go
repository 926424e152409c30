package agent

import (
	"strings"

	"github.com/cantal-go/cantal/internal/carbon"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// carbonPrefix returns the Graphite path prefix of --carbon-prefix: "{node}" stands for the
// node name made one path node (carbon.Node: dots and other characters become "_"); a
// non-empty prefix ends with a dot.
func carbonPrefix(cfg Config) string {
	p := strings.ReplaceAll(cfg.CarbonPrefix, "{node}", carbon.Node(cfg.NodeName))
	if p != "" && !strings.HasSuffix(p, ".") {
		p += "."
	}
	return p
}

// carbonSource is the agent's history as the carbon output's carbon.Source. It is used by the
// carbon goroutine only (pts is its scratch space); the history and registry it reads are safe
// to read while the scan goroutine writes.
type carbonSource struct {
	hist  *history.Store
	reg   *registry.Registry
	match *selector.Selector // nil: every series
	pts   []history.Point
}

func (s *carbonSource) Span() (oldestMs, newestMs int64) {
	st := s.hist.Stats()
	return st.OldestMs, st.LatestMs
}

// Points reads pushed series (source="push") from history.Store.MaxSlot earlier than fromMs: a
// pushed point is stored at the scan its own time falls in, which may be a scan already sent
// (history.Store.AddAt places late points up to MaxSlot back), so each round sends such a
// series' recent points again, and with them any that arrived late. Graphite keeps one value
// per slot: a point sent twice is stored once.
func (s *carbonSource) Points(fromMs, toMs int64, fn func(series.Labels, series.Kind, []history.Point) bool) {
	s.reg.View().Each(func(h registry.Handle) bool {
		kind := h.Kind()
		if kind == series.State {
			return true
		}
		labels := h.Labels()
		if s.match != nil && !s.match.Match(labels) {
			return true
		}
		from := fromMs
		if labels[registry.PushLabel] == registry.PushValue {
			from -= s.hist.MaxSlot()
		}
		s.pts = s.pts[:0]
		s.hist.Range(h.HistoryID(), from, toMs, func(ts int64, bits uint64) bool {
			s.pts = append(s.pts, history.Point{TS: ts, Bits: bits})
			return true
		})
		if len(s.pts) == 0 {
			return true
		}
		return fn(labels, kind, s.pts)
	})
}
