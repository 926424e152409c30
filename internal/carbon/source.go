package carbon

import (
	"math"
	"strings"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/histread"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// Prefix returns the Graphite path prefix of a template (the agent's --carbon-prefix):
// "{node}" stands for node made one path node (Node: dots and other characters become "_"); a
// non-empty prefix ends with a dot.
func Prefix(template, node string) string {
	p := strings.ReplaceAll(template, "{node}", Node(node))
	if p != "" && !strings.HasSuffix(p, ".") {
		p += "."
	}
	return p
}

// HistorySource is the agent's history as Run's Source, with carbon's late-point policy. Build
// it with NewHistorySource. It is used by Run's goroutine only (its reader and the late-point
// records are its state); the history it reads is safe to read while the scan goroutine writes.
//
// Late pushed points: a pushed point is stored at the scan its own time falls in, which may be
// any committed scan of the history's open segment (after history.Store.BackfillFrom), one the
// carbon output has already sent. So for each pushed series (source="push") Points keeps a
// hash of its points after BackfillFrom up to the window's end; when the next window follows
// on (the previous one was sent), the hash over that same range is taken again, and if it
// changed (a late point, or a value replaced) the series is sent again from BackfillFrom. The
// record lives in memory: the first window after a start sends pushed series from one segment
// and MaxSlot earlier, where a point that came late before the restart may lie. Scanned
// series never get late points: they are read once.
type HistorySource struct {
	hist  *history.Store
	read  *histread.Reader
	match *selector.Selector // nil: every series

	// committed is the record of the last window known sent (the next window followed on from
	// it), pending the one of the last window read.
	committed, pending *lateRecord
}

// NewHistorySource returns the Source of hist (read with the shippers' one history reader,
// histread); match, if not nil, selects the series sent.
func NewHistorySource(hist *history.Store, match *selector.Selector) *HistorySource {
	return &HistorySource{hist: hist, read: histread.New(hist), match: match}
}

// lateRecord holds, for the window that ended at to, each pushed series' hash of its points in
// (bf, to].
type lateRecord struct {
	bf, to int64
	hash   map[history.ID]uint64
}

// Span is Source.Span: the history's oldest and newest scans.
func (s *HistorySource) Span() (oldestMs, newestMs int64) { return s.read.Span() }

// FNV-1a over (ts, bits) pairs, oldest first.
const (
	hashBasis = 14695981039346656037
	hashPrime = 1099511628211
)

func hashPoint(h uint64, p history.Point) uint64 {
	h = (h ^ uint64(p.TS)) * hashPrime
	return (h ^ p.Bits) * hashPrime
}

// Points is Source.Points, with the late pushed points sent again (see HistorySource).
func (s *HistorySource) Points(fromMs, toMs int64, fn func(series.Labels, series.Kind, []history.Point) bool) {
	if s.pending != nil && fromMs == s.pending.to+1 {
		s.committed = s.pending
	}
	bf := s.read.Final()
	// The first window after a start has no record of what was sent before: pushed series are
	// read from one segment and MaxSlot before it, where a point that came late before a restart
	// may lie.
	first := int64(math.MaxInt64)
	if s.committed == nil && s.pending == nil {
		o := s.hist.Options()
		first = fromMs - int64(o.BlockScans)*o.Interval.Milliseconds() - s.hist.MaxSlot()
	}
	rec := &lateRecord{bf: bf, to: toMs, hash: map[history.ID]uint64{}}
	s.pending = rec
	c := s.committed
	s.read.Read(fromMs, toMs, 0, func(sr *histread.Series) (int64, bool) {
		labels := sr.Labels()
		if sr.Kind == series.State || labels == nil || (s.match != nil && !s.match.Match(labels)) {
			return 0, false
		}
		lo := fromMs
		if labels[registry.PushLabel] == registry.PushValue {
			lo = min(lo, max(bf, math.MinInt64+1)+1, first)
			if c != nil {
				lo = min(lo, c.bf+1)
			}
		}
		return lo, true
	}, func(sr *histread.Series, pts []history.Point) bool {
		labels := sr.Labels()
		if labels[registry.PushLabel] == registry.PushValue {
			id := sr.ID
			sendFrom := min(fromMs, first)
			if c != nil {
				old := uint64(hashBasis)
				for _, p := range pts {
					if p.TS > c.bf && p.TS <= c.to {
						old = hashPoint(old, p)
					}
				}
				if want, ok := c.hash[id]; old != want && (ok || old != hashBasis) {
					sendFrom = min(sendFrom, c.bf+1) // late points since: send the series again
				}
			}
			cur := uint64(hashBasis)
			for _, p := range pts {
				if p.TS > bf {
					cur = hashPoint(cur, p)
				}
			}
			rec.hash[id] = cur
			i := 0
			for i < len(pts) && pts[i].TS < sendFrom {
				i++
			}
			pts = pts[i:]
		}
		if len(pts) == 0 {
			return true
		}
		return fn(labels, sr.Kind, pts)
	})
}
