package agent

import (
	"bytes"
	"cmp"
	"context"
	"net/http"

	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/procscan"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/redact"
	"github.com/cantal-go/cantal/internal/remotewrite"
)

// status is the /api/v1/status answer for the caller in ctx. The problems of the scan name
// files and processes, so a caller who may not see every process gets their count only.
func (a *Agent) status(ctx context.Context) apiwire.Status {
	var s apiwire.Status
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
	s.Counts.Problems = len(v.Problems)
	caller, _ := access.FromContext(ctx)
	s.Problems = make([]apiwire.Problem, 0, len(v.Problems))
	if caller.Processes == access.ProcessesAll {
		for _, p := range v.Problems {
			s.Problems = append(s.Problems, apiwire.Problem(p))
		}
	}
	if caller.Processes != access.ProcessesAll || caller.Details != access.ProcessesAll {
		// The totals would tell what the caller may not see (N14).
		s.Counts.Processes, s.Counts.Apps = visibleCounts(a.procs.Table(), caller, a.apps.Exports)
	}
	s.Security = a.security(caller)
	s.RRDDRPC = a.rrddRPCStatus()
	s.RemoteWrite = remoteWriteWire(a.remoteWriteStatus(), caller.Has(access.Write))
	s.Alertmanagers, _ = a.notifier.Status()
	s.Config = a.configStatus()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.Memory.HeapInuse, s.Memory.HeapIdle, s.Memory.HeapReleased = ms.HeapInuse, ms.HeapIdle, ms.HeapReleased
	s.Memory.Sys, s.Memory.NumGC = ms.Sys, ms.NumGC
	hs := a.hist.Stats()
	s.Counts.HistoryPoints = hs.Points
	s.Counts.HistoryBytes = hs.CompressedBytes + hs.StagingBytes
	return s
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
func (a *Agent) processes(ctx context.Context, q api.ProcessQuery) apiwire.ProcessesAnswer {
	c, _ := access.FromContext(ctx)
	rows := processRows(a.procs.Table(), c, a.cfg.ShowCmdlines, a.apps.Exports)
	return processesAnswer(rows, q, len(rows))
}

// processesAnswer is the answer of rows (reordered in place) for q, total processes visible.
func processesAnswer(rows []apiwire.Process, q api.ProcessQuery, total int) apiwire.ProcessesAnswer {
	return apiwire.ProcessesAnswer{Processes: topProcesses(rows, q), Total: total, Fields: q.Fields}
}

// topProcesses orders rows as q asks (largest CPU share or RSS first, ties by pid) and keeps
// the first q.Limit (0: all). rows is reordered in place.
func topProcesses(rows []apiwire.Process, q api.ProcessQuery) []apiwire.Process {
	key := func(p *apiwire.Process) float64 { return p.CPUPercent }
	switch q.Sort {
	case "cpu":
	case "rss":
		key = func(p *apiwire.Process) float64 { return float64(p.RSS) }
	default:
		key = nil
	}
	if key != nil {
		slices.SortStableFunc(rows, func(a, b apiwire.Process) int {
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
func processRows(table []procscan.Process, caller access.Caller, whole bool, exports func(pid int) bool) []apiwire.Process {
	out := make([]apiwire.Process, 0, len(table))
	for i := range table {
		p := &table[i]
		if caller.Processes != access.ProcessesAll && (p.UID < 0 || !caller.SeesProcess(uint32(p.UID))) {
			continue
		}
		row := apiwire.Process{
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
func visibleCounts(table []procscan.Process, caller access.Caller, exports func(pid int) bool) (procs, apps int) {
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

func (a *Agent) security(caller access.Caller) apiwire.Security {
	sec := apiwire.Security{
		WebConfig:        a.web != nil,
		PrivateProcesses: a.privateProcesses,
		RedactCmdlines:   !a.cfg.ShowCmdlines,
		Caller:           caller.Via,
		Roles:            caller.Roles.String(),
		Listeners:        []apiwire.Listener{},
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
		sec.Listeners = append(sec.Listeners, apiwire.Listener{Addr: b.addr, Open: st.Open, Max: st.Max, PerSource: st.PerSource, Shed: st.Shed, Evicted: st.Evicted, Refused: st.Refused})
	}
	return sec
}

// remoteWriteWire is the status' remote_write list: the endpoints' last errors whole only
// for callers who may configure the agent (whole), as a receiver's own text may echo what it
// was sent or its internals (N12).
func remoteWriteWire(st []remotewrite.Status, whole bool) []apiwire.RemoteWrite {
	if st == nil {
		return nil
	}
	out := make([]apiwire.RemoteWrite, len(st))
	for i, e := range st {
		if !whole {
			e = e.ForReaders()
		}
		out[i] = e.RemoteWrite
	}
	return out
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
