package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/clusteragg"
)

// parseAgg reads agg= (sum, avg, min, max or none) and the grouping of a cluster aggregate.
func parseAgg(v url.Values) (string, clusteragg.Grouping, error) {
	agg := v.Get("agg")
	if agg != "" && !clusteragg.ValidFn(agg) {
		return "", clusteragg.Grouping{}, fmt.Errorf("bad agg %q: want sum, min, max or avg", agg)
	}
	g, err := clusteragg.ParseGrouping(v)
	return agg, g, err
}

// aggNode is one node's part of a cluster history aggregate: its series array (HistoryJSON's
// shape, node labels set) as written, or, when body is nil, its series as decoded from a
// peer's answer (not encoded and read back); and whether it is expected to the end of the
// window though it does not answer now (see clusteragg.Aggregate).
type aggNode struct {
	body    []byte
	series  []apiwire.HistorySeries
	ongoing bool
}

// appendHistoryAggregate appends the aggregate array of a cluster history answer: the nodes'
// numeric series grouped by grouping, each group aggregated by fn slot by slot
// (internal/clusteragg, the one definition the CLI and the UI follow), with each slot's count
// of series and of series expected.
func appendHistoryAggregate(b []byte, fn string, grouping clusteragg.Grouping, nodes []aggNode) []byte {
	type group struct {
		agg     apiwire.HistoryAggregate
		members [][]clusteragg.Point
		ongoing []bool
	}
	groups := map[string]*group{}
	for _, n := range nodes {
		ss := n.series
		if len(n.body) > 0 && json.Unmarshal(n.body, &ss) != nil {
			continue // an answer we cannot read: its node has no series here either
		}
		for _, sr := range ss {
			if sr.Kind == "state" {
				continue
			}
			key := grouping.Key(sr.Labels)
			k := key.Key()
			g := groups[k]
			if g == nil {
				g = &group{agg: apiwire.HistoryAggregate{Labels: key, Kind: sr.Kind, Fn: fn}}
				groups[k] = g
			}
			g.members = append(g.members, clusteragg.FromWire(sr.Points))
			g.ongoing = append(g.ongoing, n.ongoing)
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = append(b, '[')
	for i, k := range keys {
		g := groups[k]
		step := clusteragg.Step(g.members)
		g.agg.Series, g.agg.StepMs = len(g.members), step
		for _, sl := range clusteragg.Aggregate(fn, g.members, g.ongoing, step) {
			g.agg.Points = append(g.agg.Points, apiwire.AggPoint{TS: sl.TS, Value: apiwire.Float(sl.Value), N: sl.N, Expected: sl.Expected})
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = g.agg.AppendJSON(b)
	}
	return append(b, ']')
}
