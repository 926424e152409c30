package agent

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/testsupport/golden"
)

// goldenStatus is a status with every member set (a value that is not its type's zero).
func goldenStatus() apiwire.Status {
	var s apiwire.Status
	s.NodeID, s.NodeName, s.Hostname, s.Version, s.Started = "4f2a", "web<1>", "h&h", "v1.2", 1700000000000
	s.UptimeS, s.HostUptimeS, s.IntervalMs, s.HistoryS, s.Pid, s.ClusterName = 12.5, 1e21, 2000, 3600, 42, "c"
	s.LastScan.TS, s.LastScan.DurationMs, s.LastScan.Scans, s.LastScan.Added, s.LastScan.Removed, s.LastScan.Late = 1700000001000, 3.25, 2, 5, 1, 7
	c := &s.Counts
	c.Series, c.Evicted, c.Pushed, c.PushedBytes, c.PushedEvicted, c.PushRefused = 1, 2, 3, 4, 5, 6
	c.PushPoints, c.PushLate, c.LiveSeries, c.Processes, c.Apps, c.Problems, c.HistoryPoints, c.HistoryBytes = 7, 8, 9, 10, 11, 12, 13, 14
	s.Memory.HeapInuse, s.Memory.HeapIdle, s.Memory.HeapReleased, s.Memory.Sys, s.Memory.NumGC = 1, 2, 3, 4, 5
	s.ProcessScan = apiwire.ProcessScan{Scans: 1, ShedScans: 2, ShedDetails: 3, SkippedBusy: 4, DeferredDetails: 5, StatReused: 6, TaskIter: true}
	s.Problems = []apiwire.Problem{{Source: "/proc/<1>", Reason: "gone & back"}}
	s.Security = apiwire.Security{WebConfig: true, TLS: true, MutualTLS: true, WebConfigError: "bad", PrivateProcesses: true, RedactCmdlines: true,
		Caller: "uid:0", Roles: "read,write", Listeners: []apiwire.Listener{{Addr: "[::1]:22682", Open: 1, Max: 2, PerSource: 3, Shed: 4, Evicted: 5, Refused: 6}}}
	s.RRDDRPC = &apiwire.RRDDRPC{Socket: "/run/s", Plugins: []apiwire.RRDDRPCPlugin{{UID: "p", Protocol: "v2", Frequency: "5s", Since: 9}}, Calls: 1, Failures: 2, BadRequests: 3, RefusedPeers: 4}
	s.RemoteWrite = []apiwire.RemoteWrite{{Name: "rw", URL: "http://r/", PositionMs: 1, LatePositionMs: 2, LagS: 0.5, SamplesSent: 3, RequestsSent: 4,
		BytesSent: 5, FailedBatches: 6, DroppedSamples: 7, Retries: 8, Retrying: true, LastError: "500 <x>", LastErrorMs: 9}}
	return s
}

// goldenRows are process rows with every member set, and one with none.
func goldenRows() []apiwire.Process {
	return []apiwire.Process{
		{PID: 7, PPID: 1, UID: 1000, Name: "app<&>", Cmdline: []string{"app", "-v", "\x01é"}, State: "S", StartTime: 5, Threads: 3,
			CPUUser: 1.5, CPUSystem: 0.5, CPUPercent: 12.5, RSS: 1 << 60, VSZ: 8192, Swap: 1, ReadBytes: 2, WriteBytes: 3, Cgroup: "/x", AppName: "a", Metrics: true},
		{PID: 2, Cmdline: []string{}},
	}
}

// TestStatusAndProcessesWireUnchanged: the bytes of /api/v1/status and /api/v1/processes
// (whole rows and fields=) are those of testdata/*.json, written by this test before the
// answers' types moved into internal/apiwire (CANTAL_UPDATE_GOLDEN=1 rewrites them).
func TestStatusAndProcessesWireUnchanged(t *testing.T) {
	enc := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	for name, got := range map[string][]byte{
		"status":           enc(goldenStatus()),
		"status-empty":     enc(apiwire.Status{}),
		"processes":        enc(processesAnswer(goldenRows(), api.ProcessQuery{}, 3)),
		"processes-fields": enc(processesAnswer(goldenRows(), api.ProcessQuery{Sort: "rss", Fields: []string{"rss", "pid", "cmdline", "name", "cpu_percent", "metrics"}}, 3)),
	} {
		golden.Check(t, filepath.Join("testdata", name+".json"), got)
	}
}

// TestPeerWireBytes: a peer of /api/v1/peers (peerWire, apiwire.Peer) encodes to the bytes
// cluster.Peer's own encoder writes: unmeasured round trips null, zero times 0, round trips
// of every size written as encoding/json writes a float.
func TestPeerWireBytes(t *testing.T) {
	now := time.UnixMilli(1700000000123)
	for _, p := range []cluster.Peer{
		{ID: "a1", Name: "n<1>", Addr: "10.0.0.1:22682", HTTP: "10.0.0.1:22682", Version: "v1", Status: cluster.StatusAlive,
			RTT: 12_345 * time.Microsecond, LastSeen: now, Since: now.Add(-100 * time.Millisecond)},
		{ID: "a2", Name: "n2", Addr: "10.0.0.2:22682", Status: cluster.StatusDead},
		{ID: "a3", Status: cluster.StatusSuspect, RTT: time.Microsecond},
		{ID: "a4", Status: cluster.StatusAlive, RTT: 1000 * time.Second},
		{ID: "a5", Status: cluster.StatusLeft, RTT: 3 * time.Nanosecond},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(peerWire(p))
		if err != nil || string(got) != string(want) {
			t.Errorf("peer %s: %s (%v); want %s", p.ID, got, err, want)
		}
	}
}
