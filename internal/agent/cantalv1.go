package agent

import (
	"context"
	"runtime"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/cantalv1"
	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// cantalv1Routes mounts the original Cantal agent's API (package cantalv1) with this agent's
// data, each caller seeing what it sees through /api/v1 (s.SeriesVisible, processRows).
func (a *Agent) cantalv1Routes(s *api.Server) {
	o := &cantalv1.Server{
		Registry: a.reg,
		Visible:  s.SeriesVisible,
		Processes: func(ctx context.Context) []cantalv1.Process {
			c, _ := access.FromContext(ctx)
			rows := processRows(a.procs.Table(), c, a.cfg.ShowCmdlines, a.apps.Exports)
			out := make([]cantalv1.Process, len(rows))
			for i, p := range rows {
				out[i] = cantalv1.Process{PID: p.PID, PPID: p.PPID, UID: p.UID, Name: p.Name, Cmdline: p.Cmdline,
					State: p.State, StartTime: p.StartTime, Threads: p.Threads, CPUUser: p.CPUUser, CPUSystem: p.CPUSystem,
					RSS: p.RSS, VSZ: p.VSZ, Swap: p.Swap, ReadBytes: p.ReadBytes, WriteBytes: p.WriteBytes, Cgroup: p.Cgroup}
			}
			return out
		},
		Status: a.cantalv1Status,
	}
	if a.gossip != nil {
		g := a.gossip
		o.Peers = func() []cantalv1.Peer {
			peers := g.c.Peers()
			out := make([]cantalv1.Peer, len(peers))
			for i, p := range peers {
				out[i] = cantalv1.Peer{ID: p.ID, Name: p.Name, Addr: p.Addr, HTTP: p.HTTP,
					Alive: p.Status == cluster.StatusAlive, Failing: p.Status != cluster.StatusAlive,
					RTT: p.RTT, LastSeen: p.LastSeen, Since: p.Since}
			}
			return out
		}
		o.Join = g.Join
	}
	o.Register(a.mux)
}

func (a *Agent) cantalv1Status(context.Context) cantalv1.Status {
	v := a.reg.View()
	st := cantalv1.Status{
		Version:      buildinfo.Version,
		Started:      a.started,
		ScanDuration: time.Duration(a.lastScanNs.Load()),
		LastScan:     v.TS,
		BootTime:     bootTime(a.reg, v),
		Threads:      runtime.NumGoroutine(),
	}
	hs := a.hist.Stats()
	st.HistoryBytes = hs.CompressedBytes + hs.StagingBytes
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.HeapBytes = ms.HeapInuse
	if a.gossip != nil {
		for _, p := range a.gossip.c.Peers() {
			st.NumPeers++
			if p.Status != cluster.StatusAlive {
				st.NumStale++
			}
		}
	}
	return st
}

// bootTime is the machine's boot time (unix s) from its system.boot_time_s series; 0 unknown.
func bootTime(reg *registry.Registry, v *registry.View) int64 {
	var bt int64
	key := series.Labels{"metric": "system.boot_time_s"}.Key()
	v.Each(func(h registry.Handle) bool {
		if h.Key() != key {
			return true
		}
		if smp, ok := h.Latest(reg.History(), nil); ok {
			bt = int64(series.ToFloat(smp.Kind, smp.Bits))
		}
		return false
	})
	return bt
}
