package agent

import (
	"context"
	"fmt"

	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/promrules"
	"github.com/cantal-go/cantal/internal/promstore"
)

// openRules loads the --rule-files (a bad file refuses the start, with its file:line) into
// a promrules.Rules evaluated over the held history, named as /prometheus names it (every
// series: rules run for the node, not for a caller), and adds it to the collectors: each scan
// stores what the rules recorded since the previous one (source="rule"). Its groups are
// evaluated by their own tickers (Run's actor), never inside a scan.
func (a *Agent) openRules() error {
	st := promstore.New(a.hist, promstore.RegistryCatalog(a.reg), promstore.Options{
		Namer:    promstore.MapperNamer(promname.New(a.promOptions())),
		Instance: a.cfg.NodeName + ":" + listenPort(a.cfg.Listen),
		Node:     a.cfg.NodeName,
	})
	ext := "http://" + a.cfg.NodeName + ":" + listenPort(a.cfg.Listen)
	a.rules = promrules.New(promrules.Options{
		Queryable:   st,
		Interval:    a.cfg.Interval,
		Timeout:     a.cfg.QueryTimeout,
		MaxSamples:  a.cfg.QueryMaxSamples,
		ExternalURL: ext,
		Logger:      a.log.With("subsystem", "rules"),
		Notify:      a.ruleNotify(ext),
	})
	if err := a.rules.Load(a.cfg.RuleFiles); err != nil {
		return fmt.Errorf("--rule-files: %w", err)
	}
	if len(a.cfg.RuleFiles) > 0 {
		a.log.Info("rule files loaded", "files", a.rules.Files())
	}
	a.colls = append(a.colls, namedCollector{"rules", a.rules})
	return nil
}

// rulesActor runs the rule groups until the agent stops.
func (a *Agent) rulesActor() (func() error, func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	return func() error { return a.rules.Run(ctx) }, func(error) { cancel() }
}
