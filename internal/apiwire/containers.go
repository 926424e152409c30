package apiwire

// Container is one row of GET /api/v1/containers: a container the agent named (see
// docs/containers.md), its identity and the latest figures of its cgroup's series.
//
// The row is additive: a resource the agent starts to collect per container gets a new member
// with omitempty (a pointer when 0 is a figure), so an older client decodes a newer answer and
// a newer client an older one (the member then stays nil: "not collected", never 0).
//
// Rates are per second over the agent's latest two scans; a counter seen once has no rate yet
// (0). Levels are the latest scan's.
type Container struct {
	// Identity: the runtime's short id (12 hex digits), name and image; Kubernetes' pod and
	// namespace when known; the kernel's cgroup name (the "cgroup" label of its series and
	// the cgroup of its processes in /api/v1/processes).
	ID        string `json:"id"`
	Name      string `json:"name"`
	Image     string `json:"image"`
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Cgroup    string `json:"cgroup"`
	// Node is the node the container runs on (cluster answers only).
	Node string `json:"node,omitempty"`

	// CPU: usage in percent of one CPU (cgroup.cpu.usage_ms's rate / 10); CFS bandwidth
	// periods elapsed and throttled per second and time throttled in ms per second (all 0 for
	// a container without a CPU quota).
	CPUPercent       StdFloat `json:"cpu_percent"`
	CPUPeriods       StdFloat `json:"cpu_periods"`
	CPUThrottled     StdFloat `json:"cpu_throttled_periods"`
	CPUThrottledMs   StdFloat `json:"cpu_throttled_ms"`
	ThrottledPercent StdFloat `json:"throttled_percent"` // throttled periods / periods × 100

	// Memory in bytes: usage, working set (usage less inactive file), anon (RSS), file
	// (cache), and the limit (0: none).
	MemoryUsage      uint64 `json:"memory_usage"`
	MemoryWorkingSet uint64 `json:"memory_working_set"`
	MemoryRSS        uint64 `json:"memory_rss"`
	MemoryCache      uint64 `json:"memory_cache"`
	MemoryLimit      uint64 `json:"memory_limit"`
	// OOM: times the cgroup hit its limit and processes the OOM killer killed in it, since the
	// agent first saw it.
	OOMEvents uint64 `json:"oom_events"`
	OOMKills  uint64 `json:"oom_kills"`
	// Processes is the number of processes in the container.
	Processes int `json:"processes"`

	// Block I/O and network in bytes per second, summed over devices and interfaces; nil
	// when the agent does not collect them for this container.
	IOReadRate  *StdFloat `json:"io_read_rate,omitempty"`
	IOWriteRate *StdFloat `json:"io_write_rate,omitempty"`
	NetRxRate   *StdFloat `json:"net_rx_rate,omitempty"`
	NetTxRate   *StdFloat `json:"net_tx_rate,omitempty"`

	// TS is the unix ms of the scan the figures are from.
	TS int64 `json:"ts"`
}

// ContainersAnswer is the answer of GET /api/v1/containers: the rows asked for (sorted and cut
// as asked) and how many containers there are in all. The answer of
// /api/v1/cluster/containers has every node's rows (Node set) and the nodes' heads.
type ContainersAnswer struct {
	Containers []Container `json:"containers"`
	Total      int         `json:"total"`
	Nodes      []NodeHead  `json:"nodes,omitempty"`
}
