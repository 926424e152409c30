package apiwire

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
)

// NodeHead is what every cluster answer says of a node: its name, whether it answered (ok,
// stale or unreachable), since when it has been stale or unreachable (unix ms, 0: omitted)
// and why (omitted when empty). The answers' MarshalJSON omit since and error when zero, as
// the agent does; encoding/json on a NodeHead alone writes them always (cantal's own --json
// output of cluster stats relies on that).
type NodeHead struct {
	Node   string `json:"node"`
	Status string `json:"status"`
	Since  int64  `json:"since"`
	Error  string `json:"error"`
}

// AppendJSON appends {"node":…,"status":…[,"since":…][,"error":…] (no closing brace), as
// every cluster answer starts a node.
func (h *NodeHead) AppendJSON(b []byte) []byte {
	b = append(b, `{"node":`...)
	b = series.AppendJSONString(b, h.Node)
	b = append(b, `,"status":`...)
	b = series.AppendJSONString(b, h.Status)
	if h.Since != 0 {
		b = append(b, `,"since":`...)
		b = strconv.AppendInt(b, h.Since, 10)
	}
	if h.Error != "" {
		b = append(b, `,"error":`...)
		b = series.AppendJSONString(b, h.Error)
	}
	return b
}

// ClusterMetricsNode is one node of /api/v1/cluster/metrics: its head and latest values (each
// with its node label).
type ClusterMetricsNode struct {
	NodeHead
	Series []Series `json:"series"`
}

// Aggregate is one group of /api/v1/cluster/metrics?agg=: the group's labels, the function,
// the aggregated value and rate (absent when no member had one) and how many series it holds.
type Aggregate struct {
	Labels series.Labels `json:"labels"`
	Kind   string        `json:"kind"`
	Fn     string        `json:"fn"`
	Value  Number        `json:"value"`
	Rate   Number        `json:"rate"`
	Nodes  int           `json:"nodes"`
}

// AppendJSON appends g as /api/v1/cluster/metrics writes it.
func (g *Aggregate) AppendJSON(b []byte) []byte {
	b = appendHead(b, g.Labels, g.Kind, "")
	b = append(b, `,"fn":`...)
	b = series.AppendJSONString(b, g.Fn)
	b = append(b, `,"value":`...)
	b = g.Value.AppendJSON(b)
	if g.Rate.Valid {
		b = append(b, `,"rate":`...)
		b = g.Rate.AppendJSON(b)
	}
	b = append(b, `,"nodes":`...)
	b = strconv.AppendInt(b, int64(g.Nodes), 10)
	return append(b, '}')
}

// ClusterMetricsAnswer is the answer of /api/v1/cluster/metrics.
type ClusterMetricsAnswer struct {
	Nodes     []ClusterMetricsNode `json:"nodes"`
	Aggregate []Aggregate          `json:"aggregate"`
}

// UnmarshalJSON implements json.Unmarshaler, as Series.UnmarshalJSON for each series.
func (a *ClusterMetricsAnswer) UnmarshalJSON(b []byte) error {
	var w struct {
		Nodes []struct {
			NodeHead
			Series []seriesWire `json:"series"`
		} `json:"nodes"`
		Aggregate []Aggregate `json:"aggregate"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var nodes []ClusterMetricsNode
	if w.Nodes != nil {
		nodes = make([]ClusterMetricsNode, len(w.Nodes))
	}
	for i, n := range w.Nodes {
		ss, err := seriesList(n.Series)
		if err != nil {
			return err
		}
		nodes[i] = ClusterMetricsNode{NodeHead: n.NodeHead, Series: ss}
	}
	a.Nodes, a.Aggregate = nodes, w.Aggregate
	return nil
}

// MarshalJSON implements json.Marshaler, as the handler writes the answer.
func (a ClusterMetricsAnswer) MarshalJSON() ([]byte, error) {
	b := []byte(`{"nodes":[`)
	for i := range a.Nodes {
		n := &a.Nodes[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = n.AppendJSON(b)
		b = append(b, `,"series":[`...)
		for j := range n.Series {
			if j > 0 {
				b = append(b, ',')
			}
			b = n.Series[j].AppendJSON(b)
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"aggregate":[`...)
	for i := range a.Aggregate {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.Aggregate[i].AppendJSON(b)
	}
	return append(b, "]}"...), nil
}

// ClusterHistoryNode is one node of /api/v1/cluster/history: its head and its history (each
// series with its node label).
type ClusterHistoryNode struct {
	NodeHead
	Series []HistorySeries `json:"series"`
}

// ClusterHistoryAnswer is the answer of /api/v1/cluster/history; Aggregate is there with agg=.
type ClusterHistoryAnswer struct {
	Nodes     []ClusterHistoryNode `json:"nodes"`
	Aggregate []HistoryAggregate   `json:"aggregate,omitempty"`
}

// HistoryAggregate is one group of /api/v1/cluster/history?agg= (internal/clusteragg): the
// group's labels, kind and function, how many series it holds, the slots' width and one point
// per time slot.
type HistoryAggregate struct {
	Labels series.Labels `json:"labels"`
	Kind   string        `json:"kind"`
	Fn     string        `json:"fn"`
	Series int           `json:"series"`
	StepMs int64         `json:"step_ms"`
	Points []AggPoint    `json:"points"`
}

// AggPoint is one slot of an aggregate, [ts, value, nodes, expected]: the slot's time (unix
// ms, the start of its scan period), the aggregated value, how many series had a value in it
// and how many were expected; nodes < expected marks a partial slot (a node's scan of the
// newest period not in yet, an outage).
type AggPoint struct {
	TS          int64
	Value       Number
	N, Expected int
}

// Partial reports whether some series expected in the slot had no value there.
func (p AggPoint) Partial() bool { return p.N < p.Expected }

// AppendJSON appends [ts,value,nodes,expected].
func (p AggPoint) AppendJSON(b []byte) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, p.TS, 10)
	b = append(b, ',')
	b = p.Value.AppendJSON(b)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(p.N), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(p.Expected), 10)
	return append(b, ']')
}

// MarshalJSON implements json.Marshaler.
func (p AggPoint) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler: exactly four members, integers but the value.
func (p *AggPoint) UnmarshalJSON(b []byte) error {
	var q []Number
	if err := json.Unmarshal(b, &q); err != nil {
		return fmt.Errorf("aggregate point: %w", err)
	}
	if len(q) != 4 || !q[0].IsInt() || !q[2].IsInt() || !q[3].IsInt() {
		return fmt.Errorf("aggregate point: want [unix_ms, value, nodes, expected]")
	}
	ts, err := strconv.ParseInt(q[0].Raw, 10, 64)
	if err != nil {
		return fmt.Errorf("aggregate point: time: %w", err)
	}
	*p = AggPoint{TS: ts, Value: q[1], N: int(q[2].F), Expected: int(q[3].F)}
	return nil
}

// AppendJSON appends the group as the handler writes it.
func (g *HistoryAggregate) AppendJSON(b []byte) []byte {
	b = appendHead(b, g.Labels, g.Kind, "")
	b = append(b, `,"fn":`...)
	b = series.AppendJSONString(b, g.Fn)
	b = append(b, `,"series":`...)
	b = strconv.AppendInt(b, int64(g.Series), 10)
	b = append(b, `,"step_ms":`...)
	b = strconv.AppendInt(b, g.StepMs, 10)
	b = append(b, `,"points":[`...)
	for i, p := range g.Points {
		if i > 0 {
			b = append(b, ',')
		}
		b = p.AppendJSON(b)
	}
	return append(b, "]}"...)
}

// MarshalJSON implements json.Marshaler, as the handler writes the answer from the local
// store and the peers' kept history. (A window longer than the kept history is fetched from
// each peer's /api/v1/history and re-encoded with its members in alphabetical order: the same
// JSON value, other bytes.)
func (a ClusterHistoryAnswer) MarshalJSON() ([]byte, error) {
	b := []byte(`{"nodes":[`)
	for i := range a.Nodes {
		n := &a.Nodes[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = n.AppendJSON(b)
		b = append(b, `,"series":`...)
		b = AppendHistoryList(b, n.Series)
		b = append(b, '}')
	}
	b = append(b, ']')
	if a.Aggregate != nil {
		b = append(b, `,"aggregate":[`...)
		for i := range a.Aggregate {
			if i > 0 {
				b = append(b, ',')
			}
			b = a.Aggregate[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}
