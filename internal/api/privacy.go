package api

import (
	"context"
	"strconv"
	"strings"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/series"
)

// SeriesVisible returns the predicate that tells which series of this node the caller in ctx
// may see, or nil when it may see every series (access.ProcessesAll: no filter, nothing to pay
// on the hot path).
//
// Otherwise a series without a pid label is visible, and a series with one is visible only
// when the caller may see that process (access.Caller.SeesProcess of the process's uid, from
// Server.ProcessUID): never for access.ProcessesNone; for access.ProcessesOwn only when the pid
// is a live process of the caller's uid. A pid that is not a live process (a dead process's
// history, a malformed label), a nil ProcessUID, or a "node" label naming another node (a
// peer's pid says nothing about this node's processes) hides the series: privacy fails closed.
//
// The predicate remembers each pid's answer, so build one per answer (a scan's pid may be
// another process later); it is not safe for concurrent use.
//
// A caller that may not see some processes' private details (access.Caller.Details: a local
// user on the Unix socket) sees of those processes only the series /proc would show it:
// "process.*" series but the io counters ("process.io.*"); not their applications' series,
// found through the environment (N13).
func (s *Server) SeriesVisible(ctx context.Context) func(series.Labels) bool {
	c, _ := access.FromContext(ctx)
	if c.Processes == access.ProcessesAll && c.Details == access.ProcessesAll {
		return nil
	}
	v := &visibility{caller: c, uid: s.ProcessUID, node: s.NodeName}
	return v.visible
}

// PeerSeriesVisible is SeriesVisible for the series of other nodes (cluster answers, the
// WebSocket's cluster scope): nil for a caller who sees every process, else a predicate hiding
// every series with a pid label, whose uid on its node this agent cannot know. Safe for
// concurrent use.
func (s *Server) PeerSeriesVisible(ctx context.Context) func(series.Labels) bool {
	c, _ := access.FromContext(ctx)
	switch {
	case c.Processes == access.ProcessesAll && c.Details == access.ProcessesAll:
		return nil
	case c.Processes == access.ProcessesAll:
		return publicProcessSeries // another node's processes' owners are unknown here
	}
	return noProcessSeries
}

// publicProcessSeries keeps the series without a pid label and a process's series that /proc
// shows every user (see SeriesVisible).
func publicProcessSeries(l series.Labels) bool {
	_, ok := l["pid"]
	return !ok || publicMetric(l["metric"])
}

// publicMetric reports whether a process's series named metric is one /proc shows every user:
// a "process.*" series other than the io counters.
func publicMetric(metric string) bool {
	return strings.HasPrefix(metric, "process.") && !strings.HasPrefix(metric, "process.io.")
}

func noProcessSeries(l series.Labels) bool {
	_, ok := l["pid"]
	return !ok
}

type visibility struct {
	caller access.Caller
	uid    func(pid int) (uint32, bool)
	node   string
	seen   map[string]pidVisibility // pid label → what of it is visible
}

// pidVisibility is what a caller sees of a process's series.
type pidVisibility uint8

const (
	pidHidden pidVisibility = iota
	pidPublic               // only what /proc shows every user (publicMetric)
	pidAll
)

func (p pidVisibility) sees(l series.Labels) bool {
	return p == pidAll || p == pidPublic && publicMetric(l["metric"])
}

func (v *visibility) visible(l series.Labels) bool {
	pid, ok := l["pid"]
	if !ok {
		return true
	}
	if v.caller.Processes == access.ProcessesNone || v.uid == nil {
		return false
	}
	if n, ok := l["node"]; ok && n != v.node {
		return false
	}
	if vis, ok := v.seen[pid]; ok {
		return vis.sees(l)
	}
	vis := pidHidden
	if n, err := strconv.Atoi(pid); err == nil && n > 0 {
		if uid, ok := v.uid(n); ok && v.caller.SeesProcess(uid) {
			vis = pidPublic
			if v.caller.SeesDetails(uid) {
				vis = pidAll
			}
		}
	}
	if v.seen == nil {
		v.seen = make(map[string]pidVisibility)
	}
	v.seen[pid] = vis
	return vis.sees(l)
}
