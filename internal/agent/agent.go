// Package agent builds the cantal-agent from its Config and runs it: the scan loop that feeds the
// registry and the history every interval, the periodic history snapshot, and the HTTP server.
//
// Lifecycle (oklog/run, one actor per subsystem, the first to stop stops all): the signal actor
// ends on SIGINT/SIGTERM; the HTTP actor shuts its server down gracefully; the scan actor
// finishes its current scan and, being the only writer of the history, writes the final snapshot
// itself after its last scan, so a SIGTERM loses no point.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/run"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apps"
	"github.com/cantal-go/cantal/internal/containers"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/ingest"
	"github.com/cantal-go/cantal/internal/notify"
	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/promrules"
	"github.com/cantal-go/cantal/internal/querylimit"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/rrddrpc"
	"github.com/cantal-go/cantal/internal/rrddscan"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
	"github.com/cantal-go/cantal/internal/sysscan"
	"github.com/cantal-go/cantal/internal/systemd"
	"github.com/cantal-go/cantal/internal/textfile"
	"github.com/cantal-go/cantal/internal/web"
)

// Agent is one node's agent. Build it with New, then call Run once.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	nodeID  string
	started time.Time

	hist *history.Store
	// saver keeps hist's snapshot in --state-dir (nil without one); saveMu serialises its
	// Saves, which the periodic goroutine and the scan goroutine's final save both make.
	saver  *history.Saver
	saveMu sync.Mutex

	reg   *registry.Registry
	procs *procscan.Processes
	apps  *apps.Collector
	push  *ingest.Push
	rules *promrules.Rules // --rule-files (rules.go)
	// bodies is the memory request bodies may hold at once, shared by every listener and by
	// the OTLP decoder (see readBodies).
	bodies *bodyBudget
	colls  []namedCollector

	// textfile reads --textfile-dir (nil: off); /metrics and remote write take its families'
	// types from it (promOptions).
	textfile *textfile.Collector
	// systemd reads systemd's units with --systemd (nil: off); Close waits for its read.
	systemd *systemd.Collector

	alerts *alertSwitch // threshold rules, evaluated after each scan (alerts.go); a reload replaces them
	// notifier sends the rules' and the built-in alerts to --alertmanager (notify.go);
	// notifyKick tells its actor a scan was evaluated.
	notifier   *notify.Sender
	notifyKick chan struct{}

	// remoteWrite are the --remote-write endpoints, each reading hist (remotewrite.go); a
	// reload replaces the list.
	remoteWrite atomic.Pointer[[]*remotewrite.Endpoint]

	// reload is the state of configuration reloads, and the reloadable subsystems' goroutines
	// (reload.go).
	reload reloader

	mux       *http.ServeMux
	queries   *querylimit.Limiter // the query slots and answer budget (limit.go), made by routes
	listeners []boundListener
	web       *access.WebConfig // nil without --web-config
	gossip    *gossip           // nil without --cluster-name
	// state is --state-dir, locked (nil without one, or when it cannot be used): it names every
	// file the agent keeps there (package statedir).
	state *statedir.Dir
	// privateProcesses: the guard serves callers only the processes they may see (set by
	// handler from --private-processes).
	privateProcesses bool

	rrddRPC    atomic.Pointer[rrddrpc.Server] // the plugin RPC server while --rrdd-rpc is served
	lastScanNs atomic.Int64
	scans      atomic.Int64
	// lateScans counts scans that started more than 1.5 intervals after the previous one (a
	// tick skipped: the previous scan overran, or the agent got no CPU); lastScanStart is the
	// previous scan's start (scan goroutine only).
	lateScans     atomic.Int64
	lastScanStart time.Time

	// segClosed tells saveLoop that the scan closed a history segment; closedSeen is the
	// history's count of closed segments at the last scan (scan goroutine only).
	segClosed  chan struct{}
	closedSeen int64
}

type namedCollector struct {
	name string
	c    series.Collector
}

// The pushed series' budget (line protocol and statsd together; see package ingest).
const (
	pushMaxSeries = 100_000
	pushMaxBytes  = 64 << 20
)

// New builds an agent: it takes the state directory's lock, loads the history snapshot (a
// corrupt one is set aside and the agent starts empty), binds the HTTP listener (so a busy port
// fails here, before anything runs) and wires the collectors.
func New(cfg Config, log *slog.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TimerSlack > 0 {
		if err := setTimerSlack(min(cfg.TimerSlack, cfg.Interval/10)); err != nil {
			log.Info("timer slack not set: the Go runtime's monitor thread wakes more often", "err", err)
		}
	}
	a := &Agent{cfg: cfg, log: log, started: time.Now(), segClosed: make(chan struct{}, 1)}
	// GraceScans: a closing segment leaves its last 8 scans open, so that a late pushed point
	// (ingest) can always go 8 scans back, even right after a close.
	hopt := history.Options{Retention: cfg.History, Interval: cfg.Interval, BlockScans: segmentScans(cfg), GraceScans: 8}
	a.hist = history.New(hopt)
	if cfg.StateDir != "" {
		d, err := statedir.Open(cfg.StateDir)
		if err != nil {
			log.Warn("state directory unusable: history and node id will not persist", "dir", cfg.StateDir, "err", err)
		} else {
			a.state, a.nodeID = d, d.NodeID()
		}
	}
	if a.state != nil {
		// The history's snapshot directory: closed segments are written once each, so a
		// periodic save writes only what changed (history.Saver).
		h, sv, err := history.LoadDir(a.state.HistoryDir(), a.state.LegacyHistoryFile(), hopt)
		if err != nil {
			log.Error("history snapshot damaged or unreadable; starting with what could be loaded", "err", err)
		}
		a.hist, a.saver = h, sv
		st := h.Stats()
		log.Info("history loaded", "series", st.Series, "points", st.Points)
	}
	if a.nodeID == "" {
		a.nodeID = randomID()
	}
	if err := a.openRemoteWrite(); err != nil {
		a.Close()
		return nil, err
	}
	a.reg = registry.New(a.hist, cfg.History, log)
	a.reg.SetMaxSeries(cfg.MaxSeries)
	// Pushed series (source="push") have a budget of their own, apart from --max-series: ingest
	// holds at most pushMaxSeries and pushMaxBytes at once, and the registry keeps twice that
	// (a pushed series stays for the hour after its last point), evicting only pushed series.
	a.reg.SetMaxPushed(2*pushMaxSeries, 2*pushMaxBytes)

	sopt := sysscan.Options{Proc: cfg.Proc, Sys: cfg.Sys, Interrupts: cfg.Interrupts, TCPStat: cfg.TCPStat}
	mpExclude, _ := excludeRegexp(cfg.FSMountsExclude) // both checked by Validate
	typesExclude, _ := excludeRegexp(cfg.FSTypesExclude)
	popt := procscan.Options{Proc: cfg.Proc, Sys: cfg.Sys, NoTaskIter: cfg.NoBPF, States: cfg.Processes,
		// names Podman's, Docker's, containerd's (and Kubernetes') and OCI runtimes' containers
		Containers: containers.New(containers.Options{DockerRoot: cfg.DockerRoot, ContainerdState: cfg.ContainerdState, CRIOStorage: cfg.CRIOStorage}),
		Kmsg:       "/dev/kmsg"} // OOM kills of containers gone by the next scan

	a.procs = procscan.NewProcesses(popt)
	a.procs.SetBudget(cfg.Interval / 2) // under heavy churn, shed details rather than the beat
	a.apps = apps.New(a.procs, apps.Options{Proc: cfg.Proc, Log: log})
	a.colls = []namedCollector{
		{"machine", sysscan.NewMachine(sopt)},
		{"system", sysscan.NewSystem(sopt)},
		{"filesystems", sysscan.NewFilesystems(sopt, sysscan.FSOptions{MountPointsExclude: mpExclude, TypesExclude: typesExclude})},
		{"processes", a.procs},
		{"apps", a.apps},
	}
	// Pushed points are stored at their own time (ingest's package doc): the registry says
	// which times can still be placed on their scan.
	// An OTLP request's decompressed body and decoded form are taken from the body budget too.
	a.bodies = newBodyBudget(maxBody, maxBodies)
	a.push = ingest.New(ingest.Config{Logger: log.With("subsystem", "ingest"), MaxSeries: pushMaxSeries, MaxBytes: pushMaxBytes,
		Interval: cfg.Interval, BackfillFrom: a.reg.BackfillFrom, Bodies: a.bodies.sem, HistoryFull: a.reg.PushedFull})
	a.colls = append(a.colls, namedCollector{"push", a.push})
	if cfg.RRDDDir != "" {
		a.colls = append(a.colls, namedCollector{"rrdd", rrddscan.New(cfg.RRDDDir, rrddscan.Options{})})
	}
	if cfg.Systemd {
		a.systemd = systemd.New(systemd.Options{})
		a.colls = append(a.colls, namedCollector{"systemd", a.systemd})
	}
	if cfg.TextfileDir != "" {
		a.textfile = textfile.New(cfg.TextfileDir, textfile.Options{})
		a.colls = append(a.colls, namedCollector{"textfile", a.textfile})
	}
	if err := a.openNotify(); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.openRules(); err != nil {
		a.Close()
		return nil, err
	}

	if err := a.openAlerts(); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.openWeb(); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.listen(); err != nil {
		a.Close()
		return nil, err
	}
	a.mux = http.NewServeMux()
	if err := a.startGossip(); err != nil {
		a.Close()
		return nil, err
	}
	a.routes()
	a.initReload()
	return a, nil
}

// Addr returns the first HTTP listener's address.
func (a *Agent) Addr() net.Addr { return a.listeners[0].cl.Addr() }

// Close releases what New took, for an agent that will not Run.
func (a *Agent) Close() {
	for _, b := range a.listeners {
		b.ln.Close()
	}
	if a.state != nil {
		a.state.Close()
	}
	if a.apps != nil {
		a.apps.Close()
	}
	if a.systemd != nil {
		a.systemd.Close()
	}
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run runs the agent until ctx is done or a signal stops it.
func (a *Agent) Run(ctx context.Context) error {
	defer a.Close()
	var g run.Group
	g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))

	// Scanning; the final snapshot is written here after the last scan.
	scanCtx, stopScan := context.WithCancel(context.Background())
	g.Add(func() error {
		return a.scanLoop(scanCtx)
	}, func(error) { stopScan() })

	// Periodic snapshots.
	if a.state != nil {
		snapCtx, stopSnap := context.WithCancel(context.Background())
		g.Add(func() error {
			return a.saveLoop(snapCtx)
		}, func(error) { stopSnap() })
	}

	// Gossip: membership and remote subscriptions; leaves the cluster when stopped.
	if a.gossip != nil {
		gctx, stopGossip := context.WithCancel(context.Background())
		g.Add(func() error { return a.gossip.run(gctx) }, func(error) { stopGossip() })
	}

	// statsd ingest, the carbon output and remote write (one sender per endpoint, reading the
	// history; each saves its position), which a reload (SIGHUP, POST /-/reload) restarts.
	a.reloadActor(&g)
	g.Add(a.rulesActor())
	g.Add(a.notifyActor())
	if ex, in, ok := a.rrddRPCActor(); ok {
		g.Add(ex, in)
	}

	// HTTP, on every listener, behind the guard (serve.go).
	srv := a.server()
	g.Add(func() error { return a.serve(srv) }, func(error) {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})

	err := g.Run()
	var sig run.SignalError
	if errors.As(err, &sig) || errors.Is(err, context.Canceled) {
		a.log.Info("stopped", "reason", err.Error())
		return nil
	}
	return err
}

func (a *Agent) scanLoop(ctx context.Context) error {
	a.scan(ctx)
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if a.state != nil {
				a.saveHistory()
			}
			return nil
		case <-t.C:
			a.scan(ctx)
		}
	}
}

// The registry takes an application's values in one call (apps uses it when the sink has it).
var _ series.BatchSink = (*registry.Registry)(nil)

// scan runs every collector once into the registry.
func (a *Agent) scan(ctx context.Context) {
	start := time.Now()
	if !a.lastScanStart.IsZero() && start.Sub(a.lastScanStart) > a.cfg.Interval*3/2 {
		a.lateScans.Add(1)
	}
	a.lastScanStart = start
	a.reg.Begin(start.UnixMilli())
	for _, nc := range a.colls {
		if err := nc.c.Collect(ctx, a.reg); err != nil {
			a.reg.Problem(nc.name, err.Error())
		}
	}
	a.reg.Commit()
	a.alerts.Eval(a.reg.View(), a.hist)
	a.kickNotify()
	a.notifyRemoteWrite()
	if c := a.hist.Closed(); c != a.closedSeen {
		a.closedSeen = c
		select {
		case a.segClosed <- struct{}{}:
		default: // a save is pending already
		}
	}
	d := time.Since(start)
	a.lastScanNs.Store(int64(d))
	a.scans.Add(1)
	if d > a.cfg.Interval/2 {
		a.log.Warn("slow scan", "duration", d, "interval", a.cfg.Interval)
	}
}

// segmentScans is the history's segment length for cfg: one --snapshot-interval of scans,
// between 16 and 64, so that the periodic save comes right after a segment closed (see
// saveLoop). A history directory written with another length keeps its own (history.LoadDir).
func segmentScans(cfg Config) int {
	return min(max(int(cfg.SnapshotInterval/cfg.Interval), 16), history.DefaultBlockScans)
}

// saveLoop writes the history snapshot right after each segment the scans close, and when
// --snapshot-interval and a scan interval went by without one, until ctx is done.
//
// A save compresses the open segment's scans, while the closed segments, compressed once by the
// scan that closed them, are written as they are. Right after a close the open segment is
// empty, so a save costs writing one segment's file; in the middle of a segment it also
// compresses what the segment holds (about 45 ms of CPU at 100k series and 30 scans), only for
// the close to compress the same points again. With the segment one snapshot interval long
// (segmentScans), every save is of the cheap kind and the snapshot is at most an interval old;
// the timer covers longer segments (a directory written with them, or a short interval).
func (a *Agent) saveLoop(ctx context.Context) error {
	wait := a.cfg.SnapshotInterval + a.cfg.Interval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.segClosed:
		case <-t.C:
		}
		a.saveHistory()
		t.Reset(wait)
	}
}

func (a *Agent) saveHistory() {
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	start := time.Now()
	st, err := a.saver.Save()
	if err != nil {
		a.log.Error("history snapshot not written", "err", err)
		return
	}
	a.log.Debug("history snapshot written", "duration", time.Since(start), "bytes", st.Bytes, "segments", st.Segments, "series_table_rewritten", st.KeysRewritten)
}

func (a *Agent) routes() {
	a.queries = querylimit.New(queryConcurrency(), a.cfg.MaxAnswerBytes, a.cfg.AnswerBudget)
	s := &api.Server{
		Slots:          a.queries,
		Registry:       a.reg,
		Status:         a.status,
		Processes:      a.processes,
		ProcessUID:     a.processUID,
		Log:            a.log,
		MaxWindow:      a.cfg.History,
		NodeName:       a.cfg.NodeName,
		ClusterTimeout: time.Second,
		Alerts:         a.alerts.Alerts,
		MaxWebSockets:  limitsOf(a.cfg).websockets,
		Targets:        a.targets,
	}
	if a.gossip != nil {
		s.Peers = a.gossip
		s.Cluster = a.gossip.hub
	}
	s.Register(a.mux)
	a.ecosystemRoutes(s)
	a.cantalv1Routes(s)
	a.promqlRoutes(s)
	a.otlpRoutes()
	a.reloadRoutes()
	if a.cfg.Pprof {
		a.mux.HandleFunc("/debug/pprof/", pprof.Index)
		a.mux.HandleFunc("/debug/pprof/cmdline", cmdline(os.Args))
		a.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		a.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		a.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a.mux.Handle("/", web.Handler())
}

// processUID is the current uid of a live process (read from its status file, so a dead pid is
// unknown): what decides whether a caller limited to its own processes may see its series.
func (a *Agent) processUID(pid int) (uint32, bool) {
	uid, err := procscan.ProcessUID(a.cfg.Proc, pid)
	if err != nil || uid < 0 {
		return 0, false
	}
	return uint32(uid), true
}
