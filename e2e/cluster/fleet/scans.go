package fleet

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// ScanMatch is a series every agent stores at every scan, at the scan's start time: the
// periods between its consecutive points are the agent's scan periods.
const ScanMatch = "system.load_avg_1min"

// ScanPeriods returns the periods between the node's consecutive scans that started within
// [from, to], from its own history of ScanMatch (each point is stored at its scan's start). A
// scan that did not run at all shows as a longer period, never as a missing one.
func (n *Node) ScanPeriods(ctx context.Context, from, to time.Time) ([]time.Duration, error) {
	window := time.Since(from) + 2*time.Second
	q := url.Values{"match": {ScanMatch}, "window": {window.Round(time.Second).String()}}
	var ans apiwire.HistoryAnswer
	if err := n.Get(ctx, "/api/v1/history?"+q.Encode(), &ans); err != nil {
		return nil, fmt.Errorf("%s: scan periods: %w", n.Name, err)
	}
	if len(ans.Series) != 1 {
		return nil, fmt.Errorf("%s: scan periods: %d series of %s; want 1", n.Name, len(ans.Series), ScanMatch)
	}
	lo, hi := from.UnixMilli(), to.UnixMilli()
	var out []time.Duration
	prev := int64(math.MinInt64)
	for _, p := range ans.Series[0].Points {
		ts := p.TS
		if ts < lo || ts > hi {
			continue
		}
		if prev != math.MinInt64 {
			out = append(out, time.Duration(ts-prev)*time.Millisecond)
		}
		prev = ts
	}
	return out, nil
}

// ScanStats summarise the scan periods of every node over a span: whether the scans kept
// their interval. A scan is late when it started more than 1.5 intervals after the previous
// one (a tick skipped).
type ScanStats struct {
	Periods  int           // scan periods measured, all nodes
	Late     int           // late ones, all nodes
	P99, Max time.Duration // over all nodes' periods
	MaxNode  string        // the node with the longest period
	// WorstLateShare is the largest share of late scans of one node, WorstLateNode that node
	// and WorstLate its late scans.
	WorstLate      int
	WorstLateNode  string
	WorstLateShare float64
	Nodes          int // nodes measured
}

// String formats s.
func (s ScanStats) String() string {
	return fmt.Sprintf("%d nodes, %d scan periods: p99 %s, max %s (%s); %d late (> 1.5 intervals), worst node %s %d (%.1f %%)",
		s.Nodes, s.Periods, r(s.P99), r(s.Max), s.MaxNode, s.Late, s.WorstLateNode, s.WorstLate, 100*s.WorstLateShare)
}

// MeasureScans reads every node's scan periods within [from, to] (see ScanPeriods) and
// summarises them for the interval.
func MeasureScans(ctx context.Context, nodes []*Node, interval time.Duration, from, to time.Time) (ScanStats, error) {
	var (
		mu  sync.Mutex
		all []time.Duration
		st  ScanStats
	)
	late := interval * 3 / 2
	err := Each(nodes, 16, func(n *Node) error {
		ps, err := n.ScanPeriods(ctx, from, to)
		if err != nil {
			return err
		}
		nl := 0
		var nmax time.Duration
		for _, p := range ps {
			if p > late {
				nl++
			}
			nmax = max(nmax, p)
		}
		mu.Lock()
		defer mu.Unlock()
		all = append(all, ps...)
		st.Nodes++
		st.Late += nl
		if nmax > st.Max {
			st.Max, st.MaxNode = nmax, n.Name
		}
		if share := float64(nl) / float64(max(len(ps), 1)); share > st.WorstLateShare || st.WorstLateNode == "" {
			st.WorstLate, st.WorstLateNode, st.WorstLateShare = nl, n.Name, share
		}
		return nil
	})
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	st.Periods = len(all)
	st.P99 = Quantile(all, .99)
	return st, err
}
