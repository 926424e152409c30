package agent

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/cluster"
)

// nodeDownFor is how long a peer must be suspect or dead before node_down fires: a suspicion
// refuted within a few probes (a loaded peer) is not a node down.
const nodeDownFor = 10 * time.Second

// openAlerts reads --alert-rules and builds the engine the scan evaluates (see package alerts).
// A rules file that does not parse stops the agent: an operator who wrote rules expects them
// watched.
func (a *Agent) openAlerts() error {
	var rules []alerts.Rule
	if a.cfg.AlertRules != "" {
		f, err := os.Open(a.cfg.AlertRules)
		if err != nil {
			return fmt.Errorf("--alert-rules: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(f, alerts.MaxRulesFileBytes+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("--alert-rules %s: %w", a.cfg.AlertRules, err)
		}
		if rules, err = alerts.ParseRules(data); err != nil {
			return fmt.Errorf("--alert-rules %s: %w", a.cfg.AlertRules, err)
		}
	}
	a.alerts = alerts.New(alerts.Config{
		Node:        a.cfg.NodeName,
		Rules:       rules,
		CPUBusy:     a.cfg.AlertCPU,
		MemAvail:    a.cfg.AlertMemory,
		FSAvail:     a.cfg.AlertDisk,
		For:         a.cfg.AlertFor,
		NodeDown:    a.cfg.AlertNodeDown,
		NodeDownFor: nodeDownFor,
		Peers:       a.alertPeers,
		Log:         a.log.With("subsystem", "alerts"),
	})
	a.log.Info("alert rules loaded", "rules", len(rules), "file", a.cfg.AlertRules)
	return nil
}

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
		out = append(out, alerts.PeerState{Name: p.Name, Addr: p.Addr, Status: string(p.Status)})
	}
	return out
}
