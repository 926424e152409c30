package agent

// Configuration reload (issue 33): SIGHUP and POST /-/reload (write role) parse the invocation
// again through Load (the --config file, CANTAL_*, the command line), then apply what can change
// while the agent runs and list what needs a restart. A reload is all or nothing: everything
// that can fail (the file, the alert rules file, the remote-write file and endpoints, the web
// config, the statsd sockets) is done before anything changes, and a failure keeps the running
// configuration, says why (log, /api/v1/status' config, the reload's answer) and sets
// cantal_config_last_reload_successful to 0, as Prometheus does.
//
// What a reload changes (docs/configuration.md has the table): --log-level; --rule-files (the
// files parsed first, a bad one refusing the reload; promrules.Rules.Load); the alert rules
// file and the alert-* thresholds (a new engine, taken by the next scan, which keeps the state
// of the rules left unchanged); the remote-write
// endpoints (an endpoint whose settings did not change keeps running; a removed or changed one
// stops after saving its position); carbon-*; --statsd; --peer (new peers are joined, with
// gossip on); the --web-config file's contents (TLS, client CA, basic-auth users: re-read at
// once and checked as at start). Every other setting, and --web-config's path, needs a restart.
//
// Reloads never touch the scan goroutine or the history: the scan reads the alert engine and the
// endpoint list through atomic pointers, so no scan waits for a reload and nothing held is lost.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/carbon"
	"github.com/cantal-go/cantal/internal/connlimit"
	"github.com/cantal-go/cantal/internal/notify"
	"github.com/cantal-go/cantal/internal/promrules"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/statedir"
)

// invocation is what Load parsed: a reload parses it again.
type invocation struct {
	name   string
	args   []string
	getenv func(string) string
}

// reloadable names the settings (flags) a reload applies; any other that changed needs a
// restart. --peer is reloadable with gossip on only. Read-only.
var reloadable = map[string]bool{
	"log-level":   true,
	"rule-files":  true,
	"alert-rules": true, "alert-cpu": true, "alert-memory": true, "alert-disk": true, "alert-for": true, "alert-node-down": true,
	"remote-write": true, "remote-write-config": true,
	"alertmanager": true, "alertmanager-config": true,
	"carbon": true, "carbon-interval": true, "carbon-prefix": true, "carbon-match": true,
	"statsd": true,
	"peer":   true,
}

// takeReloadable sets dst's reloadable settings to src's (TestTakeReloadableCoversEveryName
// keeps it in step with reloadable).
func takeReloadable(dst *Config, src Config) {
	dst.LogLevel = src.LogLevel
	dst.RuleFiles = slices.Clone(src.RuleFiles)
	dst.AlertRules, dst.AlertCPU, dst.AlertMemory, dst.AlertDisk = src.AlertRules, src.AlertCPU, src.AlertMemory, src.AlertDisk
	dst.AlertFor, dst.AlertNodeDown = src.AlertFor, src.AlertNodeDown
	dst.RemoteWrite, dst.RemoteWriteFile = slices.Clone(src.RemoteWrite), src.RemoteWriteFile
	dst.Alertmanagers, dst.AlertmanagerFile = slices.Clone(src.Alertmanagers), src.AlertmanagerFile
	dst.Carbon, dst.CarbonInterval, dst.CarbonPrefix, dst.CarbonMatch = src.Carbon, src.CarbonInterval, src.CarbonPrefix, src.CarbonMatch
	dst.Statsd = src.Statsd
	dst.Peers = slices.Clone(src.Peers)
}

// flagValues are c's settings as their flags print them, by flag name (command-only flags
// left out).
func flagValues(c Config) map[string]string {
	var v, ch bool
	out := map[string]string{}
	c.flagSet("", &v, &ch).VisitAll(func(f *flag.Flag) {
		if !commandOnly[f.Name] {
			out[f.Name] = f.Value.String()
		}
	})
	return out
}

// ReloadResult is the answer of POST /-/reload, and what a SIGHUP's reload logs.
type ReloadResult struct {
	Status string `json:"status"` // success or error
	Error  string `json:"error,omitempty"`
	File   string `json:"file,omitempty"` // the --config file read
	// Changed are the settings the reload changed; NeedsRestart those that differ from the
	// running agent's and take effect only at a restart (flag names; web-config, alert-rules
	// and remote-write-config also when their file's contents changed).
	Changed      []string `json:"changed"`
	NeedsRestart []string `json:"needs_restart"`
}

// ConfigStatus is /api/v1/status' config object: the reloads' outcome.
type ConfigStatus = apiwire.ConfigStatus

// reloader is the agent's reload state and the goroutines of the subsystems a reload restarts
// (statsd, carbon, remote write). mu serialises reloads, and the start and stop of those
// goroutines, which Run's reload actor makes (reloadActor).
type reloader struct {
	mu sync.Mutex
	// live is the configuration in force: the start's, with the reloadable settings of the
	// last successful reload (mu).
	live Config
	// sums are the digests of the files read at the last successful load, by flag name
	// (alert-rules, web-config), so that a reload tells a file that changed (mu).
	sums map[string][sha256.Size]byte
	// running: Run's reload actor runs the goroutines below (mu); before and after, a reload
	// only records the configuration.
	running bool
	statsd  *worker
	carbon  *worker
	rw      map[string]*rwEndpoint // remote-write endpoints by URL (mu)
	// am are the Alertmanagers in force and amCapacity the sender's queue capacity (mu).
	am         []notify.TargetConfig
	amCapacity int
	// fatal takes the error of a goroutine that failed (statsd's listener, as at the start):
	// it stops the agent.
	fatal chan error

	state atomic.Pointer[ConfigStatus]
}

// rwEndpoint is one remote-write endpoint and its goroutine (nil while not running).
type rwEndpoint struct {
	cfg remotewrite.EndpointConfig
	e   *remotewrite.Endpoint
	w   *worker
}

// worker is a goroutine a reload may stop.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startWorker runs f until stop; an error it returns before that goes to r.fatal.
func (r *reloader) startWorker(name string, f func(context.Context) error) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		if err := f(ctx); err != nil && ctx.Err() == nil {
			select {
			case r.fatal <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	}()
	return w
}

// stop stops w and waits for its goroutine (nil: nothing).
func (w *worker) stop() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}

// initReload records the start's configuration as the one in force (New, after the
// subsystems were opened).
func (a *Agent) initReload() {
	r := &a.reload
	r.live = a.cfg
	r.fatal = make(chan error, 1)
	r.sums = map[string][sha256.Size]byte{}
	if a.cfg.AlertRules != "" {
		if b, err := os.ReadFile(a.cfg.AlertRules); err == nil {
			r.sums["alert-rules"] = sha256.Sum256(b)
		}
	}
	if a.cfg.WebConfig != "" {
		if b, err := os.ReadFile(a.cfg.WebConfig); err == nil {
			r.sums["web-config"] = sha256.Sum256(b)
		}
	}
	r.state.Store(&ConfigStatus{File: a.cfg.ConfigFile, LastReloadSuccessful: true, LastSuccessMs: a.started.UnixMilli(), NeedsRestart: []string{}})
}

// reloadActor adds the actor that runs statsd, carbon and the remote-write endpoints and
// reloads on SIGHUP. SIGHUP is caught from here on (it would end the process otherwise).
func (a *Agent) reloadActor(g *run.Group) {
	r := &a.reload
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, stop := context.WithCancel(context.Background())
	g.Add(func() error {
		defer signal.Stop(hup)
		r.mu.Lock()
		r.running = true
		a.startStatsd(r.live, nil, nil)
		a.startCarbon(r.live)
		for _, ep := range r.rw {
			ep.w = r.startWorker("remote write", ep.e.Run)
		}
		r.mu.Unlock()
		defer a.stopWorkers()
		for {
			select {
			case <-ctx.Done():
				return nil
			case err := <-r.fatal:
				return err
			case <-hup:
				a.Reload()
			}
		}
	}, func(error) { stop() })
}

// stopWorkers stops every reloadable subsystem's goroutine: each saves its position first.
func (a *Agent) stopWorkers() {
	r := &a.reload
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	r.statsd.stop()
	r.carbon.stop()
	r.statsd, r.carbon = nil, nil
	for _, ep := range r.rw {
		ep.w.stop()
		ep.w = nil
	}
}

// startStatsd serves statsd on cfg.Statsd (if set), on pc and ln when a reload bound them
// already, else on sockets of its own (whose failure, as any serving error, stops the agent).
// Called with r.mu held.
func (a *Agent) startStatsd(cfg Config, pc net.PacketConn, ln net.Listener) {
	if cfg.Statsd == "" {
		return
	}
	lim := limitsOf(a.cfg).streams
	addr := cfg.Statsd
	a.reload.statsd = a.reload.startWorker("statsd on "+addr, func(ctx context.Context) error {
		if pc == nil {
			return a.push.ServeStatsdWith(ctx, addr, lim)
		}
		a.log.Info("statsd listening", "udp", pc.LocalAddr().String(), "tcp", ln.Addr().String(), "max_connections", lim.Max)
		return a.push.ServeStatsdConn(ctx, pc, connlimit.NewWith(ln, lim))
	})
}

// listenStatsd binds statsd's UDP socket at addr and its TCP listener at the same host and
// port, as ingest.Push.ServeStatsdWith does: a reload binds them before it changes anything.
func listenStatsd(addr string) (net.PacketConn, net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--statsd: %w", err)
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--statsd: %w", err)
	}
	port := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		pc.Close()
		return nil, nil, fmt.Errorf("--statsd: %w", err)
	}
	return pc, ln, nil
}

// startCarbon sends to cfg.Carbon (if set) with cfg's carbon settings. Called with r.mu held.
func (a *Agent) startCarbon(cfg Config) {
	if cfg.Carbon == "" {
		return
	}
	c := &carbon.Client{Prefix: carbon.Prefix(cfg.CarbonPrefix, cfg.NodeName), Logger: a.log.With("subsystem", "carbon")}
	if a.state != nil { // one position per carbon address: a new server starts afresh
		c.Position = a.state.Position(statedir.Carbon, cfg.Carbon, cfg.Carbon)
	}
	var match *selector.Selector
	if cfg.CarbonMatch != "" {
		match, _ = selector.Parse(cfg.CarbonMatch) // checked by Validate
	}
	src := carbon.NewHistorySource(a.hist, match)
	addr, every := cfg.Carbon, cfg.CarbonInterval
	a.reload.carbon = a.reload.startWorker("carbon", func(ctx context.Context) error {
		return c.Run(ctx, addr, every, src)
	})
}

// reloadPlan is what a reload will change, everything that could fail done.
type reloadPlan struct {
	next    Config // the configuration in force after it
	changed []string
	restart []string
	sums    map[string][sha256.Size]byte

	alerts     *alerts.Engine // nil: the alert settings did not change
	alertRules int            // the rules file's rules
	// rw: the endpoints after the reload; rwStop those to stop (removed or changed), rwStart
	// those to start (new or changed).
	rw      []remotewrite.EndpointConfig
	rwStop  []string
	rwStart []remotewrite.EndpointConfig
	// am: the Alertmanagers after the reload (nil: unchanged).
	am []notify.TargetConfig
	// statsd: the sockets of the new --statsd address (nil: off or unchanged).
	statsd        bool
	statsdPC      net.PacketConn
	statsdLn      net.Listener
	carbon        bool
	peers         []string // to join
	logLevel, web bool
}

// release closes what prepare opened, for a plan that will not be applied.
func (p *reloadPlan) release() {
	if p.statsdPC != nil {
		p.statsdPC.Close()
		p.statsdLn.Close()
	}
}

// Reload reads the configuration again and applies what it can (see the top of this file).
// Safe for concurrent use: reloads run one at a time.
func (a *Agent) Reload() ReloadResult {
	r := &a.reload
	r.mu.Lock()
	defer r.mu.Unlock()
	res := ReloadResult{File: a.cfg.ConfigFile, Changed: []string{}, NeedsRestart: []string{}}
	p, err := a.prepare()
	now := time.Now()
	st := *r.state.Load()
	st.Reloads++
	st.LastReloadMs = now.UnixMilli()
	if err != nil {
		res.Status, res.Error = "error", err.Error()
		st.LastReloadSuccessful, st.LastReloadError = false, res.Error
		r.state.Store(&st)
		a.log.Error("configuration reload failed; the running configuration stays in force", "file", a.cfg.ConfigFile, "err", err)
		return res
	}
	a.apply(p)
	res.Status, res.Changed, res.NeedsRestart = "success", p.changed, p.restart
	st.File = p.next.ConfigFile
	st.LastReloadSuccessful, st.LastReloadError, st.LastSuccessMs = true, "", now.UnixMilli()
	st.NeedsRestart = p.restart
	r.state.Store(&st)
	a.log.Info("configuration reloaded", "file", a.cfg.ConfigFile, "changed", p.changed, "needs_restart", p.restart)
	return res
}

// parseAgain parses the invocation again: the --config file, CANTAL_* and the command line;
// a Config not made by Load is taken as it is (its files are still read again).
func (a *Agent) parseAgain() (Config, error) {
	inv := a.cfg.inv
	if inv == nil {
		return a.cfg, nil
	}
	c, _, err := Load(inv.name, inv.args, inv.getenv)
	return c, err
}

// prepare parses the configuration, compares it with the one in force and does everything of
// the reload that can fail. Called with r.mu held.
func (a *Agent) prepare() (*reloadPlan, error) {
	r := &a.reload
	parsed, err := a.parseAgain()
	if err != nil {
		return nil, err
	}
	if parsed.ConfigFile != a.cfg.ConfigFile {
		return nil, fmt.Errorf("the configuration file is now %q, not %q: restart the agent to change it", parsed.ConfigFile, a.cfg.ConfigFile)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(parsed.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	p := &reloadPlan{next: r.live, sums: map[string][sha256.Size]byte{}}
	takeReloadable(&p.next, parsed)
	live, start, next := flagValues(r.live), flagValues(a.cfg), flagValues(parsed)
	names := make([]string, 0, len(next))
	for n := range next {
		names = append(names, n)
	}
	slices.Sort(names)
	changed := map[string]bool{}
	for _, n := range names {
		switch {
		case reloadable[n] && (n != "peer" || a.gossip != nil):
			if next[n] != live[n] {
				changed[n] = true
			}
		case next[n] != start[n]:
			p.restart = append(p.restart, n)
		}
	}
	if a.gossip == nil { // --peer is read at the start only
		p.next.Peers = slices.Clone(r.live.Peers)
	}
	fail := func(err error) (*reloadPlan, error) {
		p.release()
		return nil, err
	}

	// Alerts: a new engine when a setting or the rules file changed.
	e, nRules, sum, err := a.newAlerts(p.next)
	if err != nil {
		return fail(err)
	}
	if p.next.AlertRules != "" {
		p.sums["alert-rules"] = sum
	}
	alertsChanged := sum != r.sums["alert-rules"]
	for _, n := range []string{"alert-rules", "alert-cpu", "alert-memory", "alert-disk", "alert-for", "alert-node-down"} {
		alertsChanged = alertsChanged || changed[n]
	}
	if alertsChanged {
		p.alerts, p.alertRules = e, nRules
		changed["alert-rules"] = changed["alert-rules"] || sum != r.sums["alert-rules"]
	}

	// Rule files: parsed as a check; a bad one refuses the reload and the old rules stay.
	if _, err := promrules.Check(p.next.RuleFiles); err != nil {
		return fail(fmt.Errorf("--rule-files: %w", err))
	}

	// Remote write: each endpoint built once as a check (no position read or written).
	if p.rw, err = remoteWriteConfigs(p.next); err != nil {
		return fail(err)
	}
	want := map[string]bool{}
	for _, c := range p.rw {
		want[c.URL] = true
		old, ok := r.rw[c.URL]
		if ok && reflect.DeepEqual(old.cfg, c) {
			continue
		}
		if _, err := a.newEndpoint(c, false); err != nil {
			return fail(err)
		}
		if ok {
			p.rwStop = append(p.rwStop, c.URL)
		}
		p.rwStart = append(p.rwStart, c)
	}
	for u := range r.rw {
		if !want[u] {
			p.rwStop = append(p.rwStop, u)
		}
	}
	if (len(p.rwStop) > 0 || len(p.rwStart) > 0) && !changed["remote-write"] && !changed["remote-write-config"] {
		changed["remote-write-config"] = true // the file's contents changed
	}

	// Alertmanagers: read and checked; a change of their list or settings is applied.
	am, capacity, err := checkNotify(p.next)
	if err != nil {
		return fail(err)
	}
	if !reflect.DeepEqual(am, r.am) {
		p.am = am
		if p.am == nil {
			p.am = []notify.TargetConfig{}
		}
		if !changed["alertmanager"] && !changed["alertmanager-config"] {
			changed["alertmanager-config"] = true // the file's contents changed
		}
	}
	if capacity != r.amCapacity {
		a.log.Warn("--alertmanager-config queue_capacity takes effect at the next start", "running", r.amCapacity, "configured", capacity)
	}

	// The web config's contents (its path needs a restart): checked as at the start.
	if a.cfg.WebConfig != "" {
		if _, err := loadWeb(a.cfg); err != nil {
			return fail(fmt.Errorf("--web-config: %w", err))
		}
		b, err := os.ReadFile(a.cfg.WebConfig)
		if err != nil {
			return fail(fmt.Errorf("--web-config: %w", err))
		}
		p.sums["web-config"] = sha256.Sum256(b)
		if p.sums["web-config"] != r.sums["web-config"] {
			changed["web-config"], p.web = true, true
		}
	}

	// statsd: the new address bound now, so that a busy one refuses the reload.
	if changed["statsd"] {
		p.statsd = true
		if p.next.Statsd != "" {
			if p.statsdPC, p.statsdLn, err = listenStatsd(p.next.Statsd); err != nil {
				return fail(err)
			}
		}
	}
	p.carbon = changed["carbon"] || changed["carbon-interval"] || changed["carbon-prefix"] || changed["carbon-match"]
	if changed["peer"] {
		for _, peer := range p.next.Peers {
			if !slices.Contains(r.live.Peers, peer) {
				p.peers = append(p.peers, peer)
			}
		}
	}
	p.logLevel = changed["log-level"]
	for n := range changed {
		p.changed = append(p.changed, n)
	}
	slices.Sort(p.changed)
	if p.changed == nil {
		p.changed = []string{}
	}
	if p.restart == nil {
		p.restart = []string{}
	}
	return p, nil
}

// apply makes p the configuration in force. Nothing in it fails but what the running agent
// would meet anyway (a receiver, a peer); it never waits for a scan. Called with r.mu held.
func (a *Agent) apply(p *reloadPlan) {
	r := &a.reload
	if p.logLevel {
		if ok, _ := setLogLevel(a.log, p.next.LogLevel); !ok {
			a.log.Warn("--log-level not changed: the logger was not made by NewLogger")
		}
	}
	if p.alerts != nil {
		a.alerts.next.Store(p.alerts) // in force from the next scan, which carries its state over
		a.log.Info("alert rules loaded", "rules", p.alertRules, "file", p.next.AlertRules)
	}
	// Rule files are read again at every reload (their contents may have changed); groups left
	// unchanged keep running with their alerts' state (rules.Manager.Update).
	if a.rules != nil {
		if err := a.rules.Load(p.next.RuleFiles); err != nil {
			a.log.Error("rule files not reloaded; the previous rules stay", "err", err)
		}
	}
	if p.web && a.web != nil {
		if err := a.web.Reload(); err != nil {
			a.log.Error("web config not reloaded", "err", err)
		}
	}
	if len(p.rwStop) > 0 || len(p.rwStart) > 0 {
		a.applyRemoteWrite(p)
	}
	if p.am != nil {
		if err := a.notifier.Apply(p.am); err != nil { // checked by prepare
			a.log.Error("alertmanagers not changed", "err", err)
		} else {
			r.am = p.am
		}
	}
	if p.statsd {
		r.statsd.stop()
		r.statsd = nil
		if r.running {
			a.startStatsd(p.next, p.statsdPC, p.statsdLn)
		} else {
			p.release()
		}
	}
	if p.carbon {
		r.carbon.stop()
		r.carbon = nil
		if r.running {
			a.startCarbon(p.next)
		}
	}
	if len(p.peers) > 0 && a.gossip != nil {
		c, log := a.gossip.c, a.log
		go func() { // a join may wait for an unreachable peer's timeout
			for _, peer := range p.peers {
				if _, err := c.Join(peer); err != nil {
					log.Warn("peer from the reloaded configuration not joined", "peer", peer, "err", err)
				}
			}
		}()
	}
	r.live = p.next
	for n, s := range p.sums {
		r.sums[n] = s
	}
	if p.next.AlertRules == "" {
		delete(r.sums, "alert-rules")
	}
}

// applyRemoteWrite stops the endpoints removed or changed (each saves its position), then
// starts the new ones from their positions, and publishes the new list.
func (a *Agent) applyRemoteWrite(p *reloadPlan) {
	r := &a.reload
	for _, u := range p.rwStop {
		if ep := r.rw[u]; ep != nil {
			ep.w.stop()
			delete(r.rw, u)
		}
	}
	for _, c := range p.rwStart {
		e, err := a.newEndpoint(c, true)
		if err != nil { // checked by prepare: a file that changed since
			a.log.Error("remote write endpoint not started", "url", remotewrite.RedactURL(c.URL), "err", err)
			continue
		}
		ep := &rwEndpoint{cfg: c, e: e}
		if r.running {
			ep.w = r.startWorker("remote write", e.Run)
		}
		r.rw[c.URL] = ep
	}
	list := make([]*remotewrite.Endpoint, 0, len(p.rw))
	for _, c := range p.rw { // in the configuration's order
		if ep := r.rw[c.URL]; ep != nil {
			list = append(list, ep.e)
		}
	}
	a.remoteWrite.Store(&list)
}

// configStatus is /api/v1/status' config object.
func (a *Agent) configStatus() ConfigStatus { return *a.reload.state.Load() }

// reloadRoutes mounts POST /-/reload (write role: package access's guard, needRole).
func (a *Agent) reloadRoutes() {
	a.mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, r *http.Request) {
		res := a.Reload()
		if res.Status != "success" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError) // as Prometheus's /-/reload
			b, _ := json.Marshal(res)
			w.Write(append(b, '\n'))
			return
		}
		api.WriteJSON(w, res)
	})
}

// reloadMetrics are the gauges of the reloads' outcome on /metrics, named as Prometheus's own.
func (a *Agent) reloadMetrics() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cantal_config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful."}, func() float64 {
			if a.reload.state.Load().LastReloadSuccessful {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cantal_config_last_reload_success_timestamp_seconds",
			Help: "Timestamp of the last successful configuration load (the start, or a reload)."}, func() float64 {
			return float64(a.reload.state.Load().LastSuccessMs) / 1000
		}),
	}
}
