package apiwire

// StatusHead is the part of the /api/v1/status answer that DESIGN.md fixes (node id and
// name, version, uptime, scan interval, last scan, counts), for clients to decode. The agent
// writes the whole answer from agent.Status, which holds these members and more (memory,
// security, problems, remote write, …) that clients show without a type (cantal status walks
// the object); TestStatusHead checks that every member here is one agent.Status writes.
type StatusHead struct {
	NodeID      string   `json:"node_id"`
	NodeName    string   `json:"node_name"`
	Hostname    string   `json:"hostname"`
	Version     string   `json:"version"`
	Started     int64    `json:"started"` // unix ms
	UptimeS     StdFloat `json:"uptime_s"`
	HostUptimeS StdFloat `json:"host_uptime_s"` // the machine's; 0 when unknown
	IntervalMs  int64    `json:"interval_ms"`
	HistoryS    StdFloat `json:"history_s"`
	Pid         int      `json:"pid"`
	ClusterName string   `json:"cluster_name"` // "" when gossip is off
	LastScan    struct {
		TS         int64    `json:"ts"` // unix ms
		DurationMs StdFloat `json:"duration_ms"`
		Scans      int64    `json:"scans"`
		Added      int      `json:"series_added"`
		Removed    int      `json:"series_removed"`
	} `json:"last_scan"`
	Counts struct {
		Series        int   `json:"series"`
		LiveSeries    int   `json:"live_series"`
		Processes     int   `json:"processes"`
		Apps          int   `json:"apps"`
		Problems      int   `json:"problems"`
		HistoryPoints int64 `json:"history_points"`
		HistoryBytes  int64 `json:"history_bytes"`
	} `json:"counts"`
}
