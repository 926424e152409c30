package agent

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
)

// nodeDownFor is how long a peer must be suspect or dead before node_down fires: a suspicion
// refuted within a few probes (a loaded peer) is not a node down.
const nodeDownFor = 10 * time.Second

// openAlerts reads --alert-rules and builds the engine the scan evaluates (see package alerts).
// A rules file that does not parse stops the agent: an operator who wrote rules expects them
// watched.
func (a *Agent) openAlerts() error {
	e, n, _, err := a.newAlerts(a.cfg)
	if err != nil {
		return err
	}
	a.alerts = &alertSwitch{}
	a.alerts.cur.Store(e)
	a.log.Info("alert rules loaded", "rules", n, "file", a.cfg.AlertRules)
	return nil
}

// newAlerts reads cfg's rules file and builds an engine of cfg's alert settings; n is the
// number of rules the file has, sum its digest (zero without one), by which a reload tells that
// the file changed.
func (a *Agent) newAlerts(cfg Config) (e *alerts.Engine, n int, sum [sha256.Size]byte, err error) {
	var rules []alerts.Rule
	if cfg.AlertRules != "" {
		f, err := os.Open(cfg.AlertRules)
		if err != nil {
			return nil, 0, sum, fmt.Errorf("--alert-rules: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(f, alerts.MaxRulesFileBytes+1))
		f.Close()
		if err != nil {
			return nil, 0, sum, fmt.Errorf("--alert-rules %s: %w", cfg.AlertRules, err)
		}
		if rules, err = alerts.ParseRules(data); err != nil {
			return nil, 0, sum, fmt.Errorf("--alert-rules %s: %w", cfg.AlertRules, err)
		}
		sum = sha256.Sum256(data)
	}
	e = alerts.New(alerts.Config{
		Node:        a.cfg.NodeName,
		Rules:       rules,
		CPUBusy:     cfg.AlertCPU,
		MemAvail:    cfg.AlertMemory,
		FSAvail:     cfg.AlertDisk,
		For:         cfg.AlertFor,
		NodeDown:    cfg.AlertNodeDown,
		NodeDownFor: nodeDownFor,
		Peers:       a.alertPeers,
		Log:         a.log.With("subsystem", "alerts"),
	})
	return e, len(rules), sum, nil
}

// alertSwitch is the engine in force, which a reload replaces: the reload leaves the new
// engine in next, and the scan goroutine, at its next evaluation, has it carry the current
// engine's pending and firing alerts of unchanged rules (alerts.Engine.Carry) and puts it in
// force; readers read the current engine's alerts.
type alertSwitch struct{ cur, next atomic.Pointer[alerts.Engine] }

// Eval evaluates the engine in force, after taking over a reload's (scan goroutine only; see
// alerts.Engine.Eval).
func (s *alertSwitch) Eval(v *registry.View, hist *history.Store) {
	if n := s.next.Swap(nil); n != nil {
		n.Carry(s.cur.Load())
		s.cur.Store(n)
	}
	s.cur.Load().Eval(v, hist)
}

// Alerts returns the current engine's latest snapshot. Safe for concurrent use.
func (s *alertSwitch) Alerts() *alerts.Snapshot { return s.cur.Load().Alerts() }

// alertPeers is the membership as node_down sees it (none without gossip). Called by the scan
// goroutine; a.gossip is set before the agent runs.
func (a *Agent) alertPeers() []alerts.PeerState {
	if a.gossip == nil {
		return nil
	}
	peers := a.gossip.c.Peers()
	out := make([]alerts.PeerState, 0, len(peers))
	for _, p := range peers {
		if p.Status == cluster.StatusAlive || p.Status == cluster.StatusLeft {
			continue
		}
		ps := alerts.PeerState{Name: p.Name, Addr: p.Addr, Status: string(p.Status)}
		if !p.LastSeen.IsZero() {
			ps.LastSeenMs = p.LastSeen.UnixMilli()
		}
		if !p.Since.IsZero() {
			ps.SinceMs = p.Since.UnixMilli()
		}
		out = append(out, ps)
	}
	return out
}
