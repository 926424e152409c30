package agent

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/oklog/run"

	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

// openRemoteWrite builds the endpoints of --remote-write and --remote-write-config, each reading
// a.hist from its position file in --state-dir (without a state directory positions live in
// memory: a restart sends the whole loaded history again, which receivers take, see package
// remotewrite).
func (a *Agent) openRemoteWrite() error {
	var cfgs []remotewrite.EndpointConfig
	for _, u := range a.cfg.RemoteWrite {
		c, err := remotewrite.FromURL(u)
		if err != nil {
			return fmt.Errorf("--remote-write: %w", err)
		}
		cfgs = append(cfgs, c)
	}
	if a.cfg.RemoteWriteFile != "" {
		more, err := remotewrite.LoadFile(a.cfg.RemoteWriteFile)
		if err != nil {
			return fmt.Errorf("--remote-write-config: %w", err)
		}
		cfgs = append(cfgs, more...)
	}
	if len(cfgs) == 0 {
		return nil
	}
	defaults := []remotewrite.Label{
		{Name: "instance", Value: a.cfg.NodeName + ":" + listenPort(a.cfg.Listen)},
		{Name: "node", Value: a.cfg.NodeName},
	}
	namer := promNamer(a.promOptions())
	seen := map[string]bool{}
	for _, c := range cfgs {
		if seen[c.URL] {
			return fmt.Errorf("remote write %s: configured twice", remotewrite.RedactURL(c.URL))
		}
		seen[c.URL] = true
		opt := remotewrite.Options{
			Source:        a.hist,
			Namer:         namer,
			Interval:      a.cfg.Interval,
			DefaultLabels: defaults,
			Late:          pushedSeries,
			Logger:        a.log.With("subsystem", "remote-write"),
		}
		if a.state != nil {
			opt.Position = a.state.Position(statedir.RemoteWrite, c.URL, remotewrite.RedactURL(c.URL))
		}
		e, err := remotewrite.New(c, opt)
		if err != nil {
			return err
		}
		a.remoteWrite = append(a.remoteWrite, e)
	}
	return nil
}

// pushedSeries tells the series that may get late points: pushed ones (/write, statsd, OTLP),
// which history.Store.AddAt stores at the scan their own time falls in, possibly one already
// sent. Remote write holds them back until their scans are final (package remotewrite).
func pushedSeries(l series.Labels) bool { return l[registry.PushLabel] == registry.PushValue }

// promNamer names series as /metrics does (internal/promname: node_exporter's names for the
// machine, with their units' scale). Per-process series are sent per pid (pid, process, cgroup
// labels), not summed per group as /metrics shows them: a sum of series is not a point any
// scan stored. State series (Info) have no history and are never read.
func promNamer(opt promname.Options) remotewrite.Namer {
	m := promname.New(opt)
	return func(l series.Labels, k series.Kind) (string, []remotewrite.Label, float64, bool) {
		s, ok := m.Map(l, k)
		if !ok || s.Type == promname.Info {
			return "", nil, 0, false
		}
		out := make([]remotewrite.Label, len(s.Labels))
		for i, l := range s.Labels {
			out[i] = remotewrite.Label{Name: l.Name, Value: l.Value}
		}
		return s.Name, out, s.Scale, true
	}
}

// listenPort is the port of the first TCP address of --listen, as Prometheus's instance label
// would carry it when scraping the agent; the default port for a Unix socket only.
func listenPort(listen string) string {
	for _, addr := range strings.Split(listen, ",") {
		addr = strings.TrimSpace(addr)
		if strings.HasPrefix(addr, "unix:") {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err == nil && port != "" && port != "0" {
			return port
		}
	}
	return "22682"
}

// remoteWriteActors adds one actor per endpoint: it sends until stopped, then saves its position.
func (a *Agent) remoteWriteActors(g *run.Group) {
	for _, e := range a.remoteWrite {
		ctx, stop := context.WithCancel(context.Background())
		g.Add(func() error { return e.Run(ctx) }, func(error) { stop() })
	}
}

// notifyRemoteWrite tells the endpoints that a scan was committed (scan goroutine).
func (a *Agent) notifyRemoteWrite() {
	for _, e := range a.remoteWrite {
		e.Notify()
	}
}

// remoteWriteStatus is the status' remote_write list (nil without endpoints).
func (a *Agent) remoteWriteStatus() []remotewrite.Status {
	if len(a.remoteWrite) == 0 {
		return nil
	}
	out := make([]remotewrite.Status, len(a.remoteWrite))
	for i, e := range a.remoteWrite {
		out[i] = e.Status()
	}
	return out
}
