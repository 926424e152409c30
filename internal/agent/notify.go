package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/rules"

	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/notify"
)

// resendDelay is how often a firing alert is sent again, the rule files' (promrules) and the
// built-in ones' alike: Prometheus's --rules.alert.resend-delay default.
const resendDelay = time.Minute

// openNotify builds the Alertmanager sender of --alertmanager and --alertmanager-config (none
// configured: alerts are only listed). Called before openRules: the rules' NotifyFunc sends
// through it. Its goroutines start with Run (notifyActor).
func (a *Agent) openNotify() error {
	targets, capacity, err := notify.Targets(a.cfg.Alertmanagers, a.cfg.AlertmanagerFile)
	if err != nil {
		return err
	}
	a.notifier = notify.New(capacity, a.log.With("subsystem", "notify"))
	if err := a.notifier.Apply(targets); err != nil {
		return err
	}
	a.reload.am, a.reload.amCapacity = targets, capacity
	a.notifyKick = make(chan struct{}, 1)
	if len(targets) > 0 {
		names := make([]string, len(targets))
		for i, t := range targets {
			names[i] = t.Name()
		}
		a.log.Info("alerts sent to Alertmanager", "alertmanagers", names)
	}
	return nil
}

// ruleNotify is the rule files' NotifyFunc: Prometheus's rules.SendAlerts through the sender,
// each alert given this node's node label when its expression left it none (vector(1), an
// aggregation), so that two nodes' alerts stay two alerts at the Alertmanager.
func (a *Agent) ruleNotify(externalURL string) rules.NotifyFunc {
	return rules.SendAlerts(nodeLabeller{a.notifier, a.cfg.NodeName}, externalURL)
}

type nodeLabeller struct {
	s    *notify.Sender
	node string
}

func (n nodeLabeller) Send(as ...*notifier.Alert) {
	for i, x := range as {
		if x.Labels.Has("node") {
			continue
		}
		c := *x
		c.Labels = labels.NewBuilder(x.Labels).Set("node", n.node).Labels()
		as[i] = &c
	}
	n.s.Send(as...)
}

// kickNotify tells notifyActor that the built-in engine evaluated a scan (scan goroutine;
// never blocks).
func (a *Agent) kickNotify() {
	select {
	case a.notifyKick <- struct{}{}:
	default:
	}
}

// notifyActor runs the sender and, after every scan, sends the built-in engine's alerts through
// it with Prometheus's resend rules (notify.Tracker), the cluster's alerts (node_down) only
// while this node is the chosen sender (clusterSender). It reads the engine's published
// snapshot: the scan never waits for it.
func (a *Agent) notifyActor() (func() error, func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	return func() error {
			done := make(chan struct{})
			go func() {
				a.notifier.Run(ctx)
				close(done)
			}()
			defer func() { <-done }()
			tr := &notify.Tracker{ResendDelay: resendDelay, Interval: a.cfg.Interval}
			base := "http://" + a.cfg.NodeName + ":" + listenPort(a.cfg.Listen)
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-a.notifyKick:
				}
				if !a.notifier.Configured() {
					continue
				}
				chosen := a.clusterSender()
				if !chosen {
					tr.Forget(func(l labels.Labels) bool { return !notify.IsCluster(l) })
				}
				firing := notify.BuiltinFiring(a.alerts.Alerts(), notify.BuiltinOptions{
					Node: a.cfg.NodeName, Instance: a.cfg.NodeName + ":" + listenPort(a.cfg.Listen),
					Chosen: chosen, GeneratorURL: base + "/"}) // the UI, whose header lists the alerts
				if out := tr.Update(time.Now(), firing); len(out) > 0 {
					a.notifier.Send(out...)
				}
			}
		}, func(error) {
			cancel()
		}
}

// clusterSender reports whether this node sends the cluster's alerts: the lowest id among the
// members alive to it, itself included (notify.Chosen); always without a cluster.
func (a *Agent) clusterSender() bool {
	if a.gossip == nil {
		return true
	}
	var alive []string
	for _, p := range a.gossip.c.Peers() {
		if p.Status == cluster.StatusAlive {
			alive = append(alive, p.ID)
		}
	}
	return notify.Chosen(a.gossip.c.ID(), alive)
}

// checkNotify reads cfg's Alertmanagers for a reload (nothing applied).
func checkNotify(cfg Config) ([]notify.TargetConfig, int, error) {
	t, c, err := notify.Targets(cfg.Alertmanagers, cfg.AlertmanagerFile)
	if err != nil {
		return nil, 0, fmt.Errorf("alertmanagers: %w", err)
	}
	return t, c, nil
}
