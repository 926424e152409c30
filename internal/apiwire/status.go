package apiwire

// Status is the answer of GET /api/v1/status: the node (id, name, version, uptime, scan
// interval), its last scan, its counts, the agent's memory, what its process scan left out,
// the scan's problems, how it faces its callers, and its shippers. The agent fills it for the
// caller who asked (agent.status) and it is encoded with encoding/json; clients decode it
// with the same type (cantal top, cantal status reads it as an ordered object).
type Status struct {
	NodeID   string  `json:"node_id"`
	NodeName string  `json:"node_name"`
	Hostname string  `json:"hostname"`
	Version  string  `json:"version"`
	Started  int64   `json:"started"` // unix ms
	UptimeS  float64 `json:"uptime_s"`
	// HostUptimeS is the machine's uptime (--proc/uptime), absent when unreadable.
	HostUptimeS float64        `json:"host_uptime_s,omitempty"`
	IntervalMs  int64          `json:"interval_ms"`
	HistoryS    float64        `json:"history_s"`
	Pid         int            `json:"pid"`
	ClusterName string         `json:"cluster_name,omitempty"` // absent when gossip is off
	LastScan    StatusLastScan `json:"last_scan"`
	Counts      StatusCounts   `json:"counts"`
	Memory      StatusMemory   `json:"memory"`
	// ProcessScan counts what the process scans left out to keep the interval (issue 22).
	ProcessScan ProcessScan `json:"process_scan"`
	Problems    []Problem   `json:"problems"`
	Security    Security    `json:"security"`
	RRDDRPC     *RRDDRPC    `json:"rrdd_rpc,omitempty"` // with --rrdd-rpc
	// RemoteWrite is each --remote-write endpoint's position, lag and counters.
	RemoteWrite []RemoteWrite `json:"remote_write,omitempty"`
	// Alertmanagers is each --alertmanager's counters.
	Alertmanagers []Alertmanager `json:"alertmanagers,omitempty"`
	// Config is the configuration reloads' outcome.
	Config ConfigStatus `json:"config"`
}

// StatusLastScan is the last scan of a Status.
type StatusLastScan struct {
	TS         int64   `json:"ts"` // unix ms
	DurationMs float64 `json:"duration_ms"`
	Scans      int64   `json:"scans"`
	Added      int     `json:"series_added"`
	Removed    int     `json:"series_removed"`
	// Late counts the scans that started more than 1.5 intervals after the previous one.
	Late int64 `json:"late"`
}

// StatusCounts are the counts of a Status.
type StatusCounts struct {
	Series  int   `json:"series"`
	Evicted int64 `json:"series_evicted"` // dropped by --max-series since the start
	// Pushed series (source="push"), in their own budget: held by the registry, what they
	// cost in bytes, evicted from it, and pushes refused by ingest for lack of room.
	Pushed        int    `json:"pushed_series"`
	PushedBytes   int64  `json:"pushed_bytes"`
	PushedEvicted int64  `json:"pushed_evicted"`
	PushRefused   uint64 `json:"push_refused"`
	// Pushed points stored (line protocol, OTLP, statsd), and those accepted on arrival
	// but refused at their scan (its history segment had closed meanwhile).
	PushPoints    uint64 `json:"push_points"`
	PushLate      uint64 `json:"push_late"`
	LiveSeries    int    `json:"live_series"`
	Processes     int    `json:"processes"`
	Apps          int    `json:"apps"`
	Problems      int    `json:"problems"`
	HistoryPoints int64  `json:"history_points"`
	HistoryBytes  int64  `json:"history_bytes"`
}

// StatusMemory is the agent's own memory (runtime.MemStats).
type StatusMemory struct {
	HeapInuse    uint64 `json:"heap_inuse"`
	HeapIdle     uint64 `json:"heap_idle"`
	HeapReleased uint64 `json:"heap_released"`
	Sys          uint64 `json:"sys"`
	NumGC        uint32 `json:"num_gc"`
}

// ProcessScan counts what the process scans left out (sysscan.ScanStats is this type).
type ProcessScan struct {
	Scans           int64 `json:"scans"`
	ShedScans       int64 `json:"shed_scans"`
	ShedDetails     int64 `json:"shed_details"`
	SkippedBusy     int64 `json:"skipped_busy"`
	DeferredDetails int64 `json:"deferred_details"`
	StatReused      int64 `json:"stat_reused"`
	TaskIter        bool  `json:"task_iterator"`
}

// Problem is one problem the last scan met: the file or process and why.
type Problem struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Security is how the agent faces its callers, and what the bounds on connections did.
type Security struct {
	WebConfig        bool   `json:"web_config"`
	TLS              bool   `json:"tls"`
	MutualTLS        bool   `json:"mutual_tls"`
	WebConfigError   string `json:"web_config_error,omitempty"` // the last reload that failed
	PrivateProcesses bool   `json:"private_processes"`
	RedactCmdlines   bool   `json:"redact_cmdlines"`
	// Caller is who asked, as the agent identified it, and its roles.
	Caller    string     `json:"caller"`
	Roles     string     `json:"roles"`
	Listeners []Listener `json:"listeners"`
}

// Listener is one listener's connection counts (package connlimit).
type Listener struct {
	Addr      string `json:"addr"`
	Open      int    `json:"open"`
	Max       int    `json:"max"`
	PerSource int    `json:"max_per_source"`
	Shed      uint64 `json:"shed"`
	Evicted   uint64 `json:"evicted"`
	Refused   uint64 `json:"refused"` // requests of anonymous callers refused: only the reserve was left
}

// RRDDRPC is the status of --rrdd-rpc: the plugins registered and what the server did.
type RRDDRPC struct {
	Socket       string          `json:"socket"`
	Plugins      []RRDDRPCPlugin `json:"plugins"`
	Calls        uint64          `json:"calls"`
	Failures     uint64          `json:"failures"`
	BadRequests  uint64          `json:"bad_requests"`
	RefusedPeers uint64          `json:"refused_peers"`
}

// RRDDRPCPlugin is one registered plugin.
type RRDDRPCPlugin struct {
	UID       string `json:"uid"`
	Protocol  string `json:"protocol"`
	Frequency string `json:"frequency"`
	Since     int64  `json:"since"` // unix ms of its first registration
}

// RemoteWrite is one --remote-write endpoint's position, lag and counters (remotewrite.Status
// holds it).
type RemoteWrite struct {
	Name       string `json:"name"`
	URL        string `json:"url"`         // without credentials or query
	PositionMs int64  `json:"position_ms"` // last scan the receiver acknowledged whole
	// LatePositionMs is the same for the series that may get late points (pushed ones); 0
	// before any.
	LatePositionMs int64   `json:"late_position_ms"`
	LagS           float64 `json:"lag_s"` // latest scan held minus position
	SamplesSent    uint64  `json:"samples_sent"`
	RequestsSent   uint64  `json:"requests_sent"`
	BytesSent      uint64  `json:"bytes_sent"`      // snappy-compressed request bodies acknowledged
	FailedBatches  uint64  `json:"failed_batches"`  // requests refused with a 4xx other than 429
	DroppedSamples uint64  `json:"dropped_samples"` // their samples
	Retries        uint64  `json:"retries"`         // attempts that failed with 5xx, 429 or a network error
	Retrying       bool    `json:"retrying"`        // the current request is being retried
	// LastError is the last failure; the receiver's own text only for callers who may
	// configure the agent (remotewrite.Status.ForReaders).
	LastError   string `json:"last_error,omitempty"`
	LastErrorMs int64  `json:"last_error_ms,omitempty"`
}

// ConfigStatus is /api/v1/status' config object: the reloads' outcome.
type ConfigStatus struct {
	File    string `json:"file,omitempty"`
	Reloads int64  `json:"reloads"` // attempted since the start
	// LastReloadSuccessful is false while the latest reload failed (the configuration before
	// it stays in force); LastReloadError says why.
	LastReloadSuccessful bool   `json:"last_reload_successful"`
	LastReloadError      string `json:"last_reload_error,omitempty"`
	LastReloadMs         int64  `json:"last_reload_ms,omitempty"` // latest attempt (unix ms)
	// LastSuccessMs is the latest successful load: the start, or a reload (unix ms).
	LastSuccessMs int64    `json:"last_reload_success_ms"`
	NeedsRestart  []string `json:"needs_restart"`
}

// Alertmanager is one --alertmanager's counters, as Prometheus's prometheus_notifications_*
// metrics count them (notify.Status holds it).
type Alertmanager struct {
	URL     string  `json:"url"`     // where alerts are posted (credentials are never in it)
	Sent    float64 `json:"sent"`    // alerts the Alertmanager took
	Errors  float64 `json:"errors"`  // alerts of failed requests
	Dropped float64 `json:"dropped"` // alerts dropped: failed requests, a full queue
	Queue   float64 `json:"queue"`   // alerts waiting
}
