package agent

import (
	"bytes"
	"cmp"
	"context"
	"net/http"

	"github.com/cantal-go/cantal/internal/buildinfo"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/redact"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/sysscan"
)

// Status is the /api/v1/status answer.
type Status struct {
	NodeID   string  `json:"node_id"`
	NodeName string  `json:"node_name"`
	Hostname string  `json:"hostname"`
	Version  string  `json:"version"`
	Started  int64   `json:"started"` // unix ms
	UptimeS  float64 `json:"uptime_s"`
	// HostUptimeS is the machine's uptime (--proc/uptime), absent when unreadable.
	HostUptimeS float64 `json:"host_uptime_s,omitempty"`
	IntervalMs  int64   `json:"interval_ms"`
	HistoryS    float64 `json:"history_s"`
	Pid         int     `json:"pid"`
	ClusterName string  `json:"cluster_name,omitempty"`
	LastScan    struct {
		TS         int64   `json:"ts"`
		DurationMs float64 `json:"duration_ms"`
		Scans      int64   `json:"scans"`
		Added      int     `json:"series_added"`
		Removed    int     `json:"series_removed"`
		// Late counts the scans that started more than 1.5 intervals after the previous one.
		Late int64 `json:"late"`
	} `json:"last_scan"`
	Counts struct {
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
	} `json:"counts"`
	Memory struct {
		HeapInuse    uint64 `json:"heap_inuse"`
		HeapIdle     uint64 `json:"heap_idle"`
		HeapReleased uint64 `json:"heap_released"`
		Sys          uint64 `json:"sys"`
		NumGC        uint32 `json:"num_gc"`
	} `json:"memory"`
	// ProcessScan counts what the process scans left out to keep the interval (issue 22).
	ProcessScan sysscan.ScanStats  `json:"process_scan"`
	Problems    []registry.Problem `json:"problems"`
	Security    Security           `json:"security"`
	RRDDRPC     *RRDDRPCStatus     `json:"rrdd_rpc,omitempty"` // with --rrdd-rpc
	// RemoteWrite is each --remote-write endpoint's position, lag and counters.
	RemoteWrite []remotewrite.Status `json:"remote_write,omitempty"`
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
	Caller    string           `json:"caller"`
	Roles     string           `json:"roles"`
	Listeners []ListenerStatus `json:"listeners"`
}

// ListenerStatus is one listener's connection counts (package connlimit).
type ListenerStatus struct {
	Addr      string `json:"addr"`
	Open      int    `json:"open"`
	Max       int    `json:"max"`
	PerSource int    `json:"max_per_source"`
	Shed      uint64 `json:"shed"`
	Evicted   uint64 `json:"evicted"`
	Refused   uint64 `json:"refused"` // requests of anonymous callers refused: only the reserve was left
}

// status is the /api/v1/status answer for the caller in ctx. The problems of the scan name
// files and processes, so a caller who may not see every process gets their count only.
func (a *Agent) status(ctx context.Context) any {
	var s Status
	s.NodeID = a.nodeID
	s.NodeName = a.cfg.NodeName
	s.Hostname, _ = os.Hostname()
	s.Version = buildinfo.Version
	s.Started = a.started.UnixMilli()
	s.UptimeS = time.Since(a.started).Seconds()
	s.HostUptimeS = hostUptime(a.cfg.Proc)
	s.IntervalMs = a.cfg.Interval.Milliseconds()
	s.HistoryS = a.cfg.History.Seconds()
	s.Pid = os.Getpid()
	s.ClusterName = a.cfg.ClusterName
	v := a.reg.View()
	s.LastScan.TS = v.TS
	s.LastScan.DurationMs = float64(a.lastScanNs.Load()) / 1e6
	s.LastScan.Scans = a.scans.Load()
	s.LastScan.Late = a.lateScans.Load()
	s.LastScan.Added, s.LastScan.Removed = v.Added, v.Removed
	s.Counts.Series = v.Len()
	s.Counts.LiveSeries = v.Live
	s.Counts.Evicted = v.Evicted - v.EvictedPushed
	s.Counts.Pushed, s.Counts.PushedBytes, s.Counts.PushedEvicted = v.Pushed, v.PushedBytes, v.EvictedPushed
	ps := a.push.Stats()
	s.Counts.PushRefused, s.Counts.PushPoints, s.Counts.PushLate = ps.Refused, ps.Points, ps.Late
	s.Counts.Processes = a.procs.Len() // not len(Table()): a copy of the table (2.6 MB at 10 000 processes) per status request
	s.ProcessScan = a.procs.Stats()
	s.Counts.Apps = a.apps.Count()
	s.Problems = v.Problems
	if s.Problems == nil {
		s.Problems = []registry.Problem{}
	}
	s.Counts.Problems = len(s.Problems)
	caller, _ := access.FromContext(ctx)
	if caller.Processes != access.ProcessesAll {
		s.Problems = []registry.Problem{}
	}
	if caller.Processes != access.ProcessesAll || caller.Details != access.ProcessesAll {
		// The totals would tell what the caller may not see (N14).
		s.Counts.Processes, s.Counts.Apps = visibleCounts(a.procs.Table(), caller, a.apps.Exports)
	}
	s.Security = a.security(caller)
	s.RRDDRPC = a.rrddRPCStatus()
	s.RemoteWrite = a.remoteWriteStatus()
	if !caller.Has(access.Write) {
		// A receiver's own text may echo what it was sent or its internals: whole only to
		// the callers who may configure the agent (N12).
		for i := range s.RemoteWrite {
			s.RemoteWrite[i] = s.RemoteWrite[i].ForReaders()
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.Memory.HeapInuse, s.Memory.HeapIdle, s.Memory.HeapReleased = ms.HeapInuse, ms.HeapIdle, ms.HeapReleased
	s.Memory.Sys, s.Memory.NumGC = ms.Sys, ms.NumGC
	hs := a.hist.Stats()
	s.Counts.HistoryPoints = hs.Points
	s.Counts.HistoryBytes = hs.CompressedBytes + hs.StagingBytes
	return s
}

// ProcessJSON is one process in /api/v1/processes.
type ProcessJSON struct {
	PID        int      `json:"pid"`
	PPID       int      `json:"ppid"`
	UID        int      `json:"uid"`
	Name       string   `json:"name"`
	Cmdline    []string `json:"cmdline"`
	State      string   `json:"state"`
	StartTime  int64    `json:"start_time"`
	Threads    int      `json:"threads"`
	CPUUser    float64  `json:"cpu_user"`
	CPUSystem  float64  `json:"cpu_system"`
	CPUPercent float64  `json:"cpu_percent"`
	RSS        uint64   `json:"rss"`
	VSZ        uint64   `json:"vsz"`
	Swap       uint64   `json:"swap"`
	ReadBytes  uint64   `json:"read_bytes"`
	WriteBytes uint64   `json:"write_bytes"`
	Cgroup     string   `json:"cgroup"`
	AppName    string   `json:"appname,omitempty"`
	Metrics    bool     `json:"metrics"`
}

// hostUptime reads the machine's uptime in seconds from proc's uptime file (its first
// field); 0 when it cannot be read or parsed.
func hostUptime(proc string) float64 {
	b, err := os.ReadFile(filepath.Join(proc, "uptime"))
	if err != nil {
		return 0
	}
	f, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte(" "))
	v, err := strconv.ParseFloat(string(f), 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// processes is the /api/v1/processes answer for the caller in ctx: the rows of the processes
// it may see (access.Caller.SeesProcess), with command lines redacted by package redact unless
// --show-cmdlines. A caller who may see no process gets an empty list, not an error, as /proc
// mounted hidepid=2 shows an unprivileged user an empty process list rather than refusing.
func (a *Agent) processes(ctx context.Context, q api.ProcessQuery) any {
	c, _ := access.FromContext(ctx)
	rows := processRows(a.procs.Table(), c, a.cfg.ShowCmdlines, a.apps.Exports)
	return processesAnswer(rows, q, len(rows))
}

// processesAnswer is the answer of rows (reordered in place) for q, total processes visible.
func processesAnswer(rows []ProcessJSON, q api.ProcessQuery, total int) any {
	top := topProcesses(rows, q)
	if q.Fields != nil {
		return map[string]any{"processes": projectRows(top, q.Fields), "total": total}
	}
	return map[string]any{"processes": top, "total": total}
}

// projectRows keeps only the given keys (each one of api.ProcessFields) of each row.
func projectRows(rows []ProcessJSON, fields []string) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i := range rows {
		p := &rows[i]
		m := make(map[string]any, len(fields))
		for _, f := range fields {
			m[f] = p.field(f)
		}
		out[i] = m
	}
	return out
}

// field is the value of the row's key f (one of api.ProcessFields; nil for any other).
func (p *ProcessJSON) field(f string) any {
	switch f {
	case "pid":
		return p.PID
	case "ppid":
		return p.PPID
	case "uid":
		return p.UID
	case "name":
		return p.Name
	case "cmdline":
		return p.Cmdline
	case "state":
		return p.State
	case "start_time":
		return p.StartTime
	case "threads":
		return p.Threads
	case "cpu_user":
		return p.CPUUser
	case "cpu_system":
		return p.CPUSystem
	case "cpu_percent":
		return p.CPUPercent
	case "rss":
		return p.RSS
	case "vsz":
		return p.VSZ
	case "swap":
		return p.Swap
	case "read_bytes":
		return p.ReadBytes
	case "write_bytes":
		return p.WriteBytes
	case "cgroup":
		return p.Cgroup
	case "appname":
		return p.AppName
	case "metrics":
		return p.Metrics
	}
	return nil
}

// topProcesses orders rows as q asks (largest CPU share or RSS first, ties by pid) and keeps
// the first q.Limit (0: all). rows is reordered in place.
func topProcesses(rows []ProcessJSON, q api.ProcessQuery) []ProcessJSON {
	key := func(p *ProcessJSON) float64 { return p.CPUPercent }
	switch q.Sort {
	case "cpu":
	case "rss":
		key = func(p *ProcessJSON) float64 { return float64(p.RSS) }
	default:
		key = nil
	}
	if key != nil {
		slices.SortStableFunc(rows, func(a, b ProcessJSON) int {
			if c := cmp.Compare(key(&b), key(&a)); c != 0 {
				return c
			}
			return cmp.Compare(a.PID, b.PID)
		})
	}
	if q.Limit > 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	return rows
}

// processRows turns the process table into the rows caller may see; whole keeps command lines
// unredacted; exports tells whether a process exports metrics.
func processRows(table []sysscan.Process, caller access.Caller, whole bool, exports func(pid int) bool) []ProcessJSON {
	out := make([]ProcessJSON, 0, len(table))
	for i := range table {
		p := &table[i]
		if caller.Processes != access.ProcessesAll && (p.UID < 0 || !caller.SeesProcess(uint32(p.UID))) {
			continue
		}
		row := ProcessJSON{
			PID: p.PID, PPID: p.PPID, UID: p.UID, Name: p.Name, Cmdline: p.Cmdline,
			State: p.State, StartTime: p.StartTime, Threads: p.Threads,
			CPUUser: p.CPUUser, CPUSystem: p.CPUSystem, CPUPercent: p.CPUPercent,
			RSS: p.RSS, VSZ: p.VSZ, Swap: p.Swap, ReadBytes: p.ReadBytes, WriteBytes: p.WriteBytes,
			Cgroup: p.Cgroup, AppName: p.CantalAppName, Metrics: exports(p.PID),
		}
		if !whole {
			row.Cmdline = redact.Args(row.Cmdline) // a copy when it changes: the table's is shared
		}
		if p.UID < 0 || !caller.SeesDetails(uint32(p.UID)) {
			// /proc/PID/io and environ are the owner's and root's (N13).
			row.ReadBytes, row.WriteBytes, row.AppName, row.Metrics = 0, 0, "", false
		}
		if row.Cmdline == nil {
			row.Cmdline = []string{}
		}
		out = append(out, row)
	}
	return out
}

// visibleCounts returns the processes caller may see and the applications among them whose
// details it may see (distinct CANTAL_PATHs of processes whose metrics were read), for a caller
// who may not see everything: the totals would tell it of processes /proc hides from it.
func visibleCounts(table []sysscan.Process, caller access.Caller, exports func(pid int) bool) (procs, apps int) {
	paths := map[string]bool{}
	for i := range table {
		p := &table[i]
		if p.UID < 0 || !caller.SeesProcess(uint32(p.UID)) {
			continue
		}
		procs++
		if caller.SeesDetails(uint32(p.UID)) && exports(p.PID) && !paths[p.CantalPath] {
			paths[p.CantalPath] = true
			apps++
		}
	}
	return procs, apps
}

func (a *Agent) security(caller access.Caller) Security {
	sec := Security{
		WebConfig:        a.web != nil,
		PrivateProcesses: a.privateProcesses,
		RedactCmdlines:   !a.cfg.ShowCmdlines,
		Caller:           caller.Via,
		Roles:            caller.Roles.String(),
		Listeners:        []ListenerStatus{},
	}
	if caller.Name != "" {
		sec.Caller += " " + caller.Name
	}
	if a.web != nil {
		sec.TLS, sec.MutualTLS = a.web.TLS(), a.web.MutualTLS()
		if err := a.web.Err(); err != nil {
			sec.WebConfigError = err.Error()
		}
	}
	for _, b := range a.listeners {
		st := b.cl.Stats()
		sec.Listeners = append(sec.Listeners, ListenerStatus{Addr: b.addr, Open: st.Open, Max: st.Max, PerSource: st.PerSource, Shed: st.Shed, Evicted: st.Evicted, Refused: st.Refused})
	}
	return sec
}

// cmdline serves /debug/pprof/cmdline as net/http/pprof does (the arguments, NUL-separated),
// redacted by package redact: the agent's own command line may name a secret (issue 31, N12).
func cmdline(args []string) http.HandlerFunc {
	text := strings.Join(redact.Args(args), "\x00")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(text))
	}
}
