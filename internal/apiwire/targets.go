package apiwire

// TargetGroup is one group of GET /api/v1/targets, in the format of Prometheus's HTTP service
// discovery (http_sd_configs): the answer is a JSON array of groups, one per cluster member.
type TargetGroup struct {
	Targets []string          `json:"targets"` // the member's scrape address, host:port
	Labels  map[string]string `json:"labels"`  // node, and cluster when gossip is on
}
