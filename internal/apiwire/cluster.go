package apiwire

import (
	"encoding/json"
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

// appendJSON appends {"node":…,"status":…[,"since":…][,"error":…] (no closing brace).
func (h *NodeHead) appendJSON(b []byte) []byte {
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
		b = n.appendJSON(b)
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
		g := &a.Aggregate[i]
		if i > 0 {
			b = append(b, ',')
		}
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
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// ClusterHistoryNode is one node of /api/v1/cluster/history: its head and its history (each
// series with its node label).
type ClusterHistoryNode struct {
	NodeHead
	Series []HistorySeries `json:"series"`
}

// ClusterHistoryAnswer is the answer of /api/v1/cluster/history.
type ClusterHistoryAnswer struct {
	Nodes []ClusterHistoryNode `json:"nodes"`
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
		b = n.appendJSON(b)
		b = append(b, `,"series":`...)
		b = appendHistoryList(b, n.Series)
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}
