package apiwire

import "github.com/cantal-go/cantal/internal/series"

// Peer is one known peer of /api/v1/peers (the node itself is never listed).
type Peer struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Addr     string `json:"addr"` // gossip host:port
	HTTP     string `json:"http"` // its API's host:port
	Version  string `json:"version,omitempty"`
	Status   string `json:"status"` // alive, suspect, dead or left
	RTTMs    Number `json:"rtt_ms"` // absent (null) until measured
	LastSeen int64  `json:"last_seen"`
	Since    int64  `json:"since"` // unix ms of the last status change
}

// PeersAnswer is the answer of GET /api/v1/peers.
type PeersAnswer struct {
	Peers []Peer `json:"peers"`
}

// AddPeerRequest is the body of POST /api/v1/peers.
type AddPeerRequest struct {
	Addr string `json:"addr"`
}

// AddPeerAnswer is the answer of POST /api/v1/peers.
type AddPeerAnswer struct {
	Joined string `json:"joined"`
}

// Alert is one alert of /api/v1/alerts (Node empty) and /api/v1/cluster/alerts.
type Alert struct {
	Name      string        `json:"name"`
	State     string        `json:"state"` // pending or firing
	Severity  string        `json:"severity"`
	Node      string        `json:"node"`
	Labels    series.Labels `json:"labels"` // the series' labels ({} when the caller may not see it)
	Value     StdFloat      `json:"value"`
	Op        string        `json:"op"`
	Threshold StdFloat      `json:"threshold"`
	SinceMs   int64         `json:"since_ms"` // when it entered its state (unix ms, scan time)
	Summary   string        `json:"summary"`
}

// AlertsNode is one node of /api/v1/cluster/alerts.
type AlertsNode struct {
	Node   string `json:"node"`
	Status string `json:"status"` // ok or unreachable
	Error  string `json:"error,omitempty"`
	Firing int    `json:"firing"`
}

// AlertsAnswer is the answer of /api/v1/alerts and /api/v1/cluster/alerts (Nodes only in the
// cluster answer). It is encoded with encoding/json.
type AlertsAnswer struct {
	Alerts []Alert `json:"alerts"`
	// Truncated names the node's rules that matched more series than they may evaluate.
	Truncated []string     `json:"truncated,omitempty"`
	Nodes     []AlertsNode `json:"nodes,omitempty"`
}
