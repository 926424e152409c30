package agent

import (
	"fmt"
	"net"
	"strings"

	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

// openRemoteWrite builds the endpoints of --remote-write and --remote-write-config, each reading
// a.hist from its position file in --state-dir (without a state directory positions live in
// memory: a restart sends the whole loaded history again, which receivers take, see package
// remotewrite). Their goroutines start with Run (reload.go).
func (a *Agent) openRemoteWrite() error {
	cfgs, err := remoteWriteConfigs(a.cfg)
	if err != nil {
		return err
	}
	a.reload.rw = map[string]*rwEndpoint{}
	var list []*remotewrite.Endpoint
	for _, c := range cfgs {
		e, err := a.newEndpoint(c, true)
		if err != nil {
			return err
		}
		a.reload.rw[c.URL] = &rwEndpoint{cfg: c, e: e}
		list = append(list, e)
	}
	a.remoteWrite.Store(&list)
	return nil
}

// remoteWriteConfigs reads cfg's endpoints: --remote-write's URLs, then --remote-write-config's
// list; a URL given twice is an error.
func remoteWriteConfigs(cfg Config) ([]remotewrite.EndpointConfig, error) {
	var cfgs []remotewrite.EndpointConfig
	for _, u := range cfg.RemoteWrite {
		c, err := remotewrite.FromURL(u)
		if err != nil {
			return nil, fmt.Errorf("--remote-write: %w", err)
		}
		cfgs = append(cfgs, c)
	}
	if cfg.RemoteWriteFile != "" {
		more, err := remotewrite.LoadFile(cfg.RemoteWriteFile)
		if err != nil {
			return nil, fmt.Errorf("--remote-write-config: %w", err)
		}
		cfgs = append(cfgs, more...)
	}
	seen := map[string]bool{}
	for _, c := range cfgs {
		if seen[c.URL] {
			return nil, fmt.Errorf("remote write %s: configured twice", remotewrite.RedactURL(c.URL))
		}
		seen[c.URL] = true
	}
	return cfgs, nil
}

// newEndpoint builds the endpoint of c, at its position in --state-dir when positioned (else
// with none: a check that c can be built, which reads and writes no file).
func (a *Agent) newEndpoint(c remotewrite.EndpointConfig, positioned bool) (*remotewrite.Endpoint, error) {
	opt := remotewrite.Options{
		Source:   a.hist,
		Namer:    promNamer(a.promOptions()),
		Interval: a.cfg.Interval,
		DefaultLabels: []remotewrite.Label{
			{Name: "instance", Value: a.cfg.NodeName + ":" + listenPort(a.cfg.Listen)},
			{Name: "node", Value: a.cfg.NodeName},
		},
		Late:   pushedSeries,
		Logger: a.log.With("subsystem", "remote-write"),
	}
	if positioned && a.state != nil {
		opt.Position = a.state.Position(statedir.RemoteWrite, c.URL, remotewrite.RedactURL(c.URL))
	}
	return remotewrite.New(c, opt)
}

// pushedSeries tells the series that may get late points: pushed ones (/write, statsd, OTLP),
// which history.Store.AddAt stores at the scan their own time falls in, possibly one already
// sent. Remote write holds them back until their scans are final (package remotewrite).
func pushedSeries(l series.Labels) bool { return l[registry.PushLabel] == registry.PushValue }

// promNamer names series as /metrics does (internal/promname: node_exporter's names for the
// machine, with their units' scale; a container's cgroup series also under its cAdvisor name,
// promname.Mapper.MapAll). Per-process series are sent per pid (pid, process, cgroup
// labels), not summed per group as /metrics shows them: a sum of series is not a point any
// scan stored. State series (Info) have no history and are never read.
func promNamer(opt promname.Options) remotewrite.Namer {
	m := promname.New(opt)
	return func(l series.Labels, k series.Kind) []remotewrite.Named {
		all := m.MapAll(nil, l, k)
		out := make([]remotewrite.Named, 0, len(all))
		for _, s := range all {
			if s.Type == promname.Info {
				continue
			}
			ls := make([]remotewrite.Label, len(s.Labels))
			for i, l := range s.Labels {
				ls[i] = remotewrite.Label{Name: l.Name, Value: l.Value}
			}
			out = append(out, remotewrite.Named{Name: s.Name, Labels: ls, Scale: s.Scale})
		}
		return out
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

// endpoints are the remote-write endpoints in force. Safe for concurrent use.
func (a *Agent) endpoints() []*remotewrite.Endpoint {
	if p := a.remoteWrite.Load(); p != nil {
		return *p
	}
	return nil
}

// notifyRemoteWrite tells the endpoints that a scan was committed (scan goroutine).
func (a *Agent) notifyRemoteWrite() {
	for _, e := range a.endpoints() {
		e.Notify()
	}
}

// remoteWriteStatus is the status' remote_write list (nil without endpoints).
func (a *Agent) remoteWriteStatus() []remotewrite.Status {
	eps := a.endpoints()
	if len(eps) == 0 {
		return nil
	}
	out := make([]remotewrite.Status, len(eps))
	for i, e := range eps {
		out[i] = e.Status()
	}
	return out
}
