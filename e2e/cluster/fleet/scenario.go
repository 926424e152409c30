package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/netns"
)

// Scenario is the fleet-scale run of issue 24, shared by the partition test (20 nodes) and the
// fleet benchmark (10, 50, 150 nodes): convergence, first queries, steady-state queries and
// the answering node's cost, a rejoin, then a half/half partition and its heal, with cluster
// queries at the answering node (node 1) all along.
type Scenario struct {
	Match     string        // selector of the queries (default system.load_avg_1min)
	Window    string        // history window of the history queries (default 5m)
	Steady    time.Duration // steady-state measurement (default 10s)
	Partition time.Duration // how long the two halves stay apart (default 60s)
	// AfterHeal is how long queries go on after the membership is whole again (default 5s).
	AfterHeal time.Duration
	// Converge bounds the waits for membership (default 2 min).
	Converge time.Duration
	// Logf, when set, gets progress lines.
	Logf func(format string, args ...any)
	// HealPoll is how often the membership of every node is polled after the heal until it is
	// whole (default 100 ms). The time it took comes from the nodes' own status-change times,
	// not from the polling; each poll asks all N nodes for their N-1 peers, which at 150 nodes
	// is work for the agents and the querier's process in the heal's busiest seconds.
	HealPoll time.Duration
	// HealProfile, when set, is the file that gets node 1's CPU profile over the first 6 s
	// of the heal (node 1 must run with --pprof: Options.FirstExtra).
	HealProfile string
}

// Report is what a Scenario measured. Durations are wall time on the shared machine; CPU
// figures are CPU time from /proc.
type Report struct {
	N         int
	Converged time.Duration // from the last agent's start until all list all alive
	Join      time.Duration // a restarted node: from its start until it and all others list each other alive

	FirstMetrics, FirstHistory time.Duration // the first cluster queries at node 1
	FirstNotOK                 []string      // nodes not ok in the first metrics answer
	// FirstMetricsCPU is node 1's CPU time (schedstat) over its first metrics query: opening
	// a connection per peer, subscribing, decoding the first answers, answering.
	FirstMetricsCPU time.Duration

	Steady QueryStats // during Steady
	// Answering node's cost over Steady (queries at node 1 back to back, a metrics and a
	// history query about every 200 ms), less a non-answering node's (node 2), per peer:
	CPUPerPeerPerInterval time.Duration
	RSSPerPeer            int64
	AnsweringCPU          time.Duration // node 1's CPU time per interval
	BaselineCPU           time.Duration // node 2's CPU time per interval
	AnsweringRSS          int64
	BaselineRSS           int64
	// The same over Steady without queries (the subscriptions stay, one update per peer and
	// scan): node 1's and node 2's CPU per interval, and the difference per peer.
	SubsCPU, SubsBaselineCPU  time.Duration
	SubsCPUPerPeerPerInterval time.Duration

	// Partition: half/half, node 1 in the first half.
	Cut             QueryStats
	CutNotOK        time.Duration // until every node of the other half was shown not ok at node 1
	CutNotOKMissing []string      // nodes of the other half never shown not ok at node 1
	Heal            QueryStats    // from the heal until AfterHeal past the whole membership
	Whole           time.Duration // from the heal until every node lists every other alive
	// From the heal until node 1's metrics answer has no node unreachable (its connections to
	// the other half are back; a node may still be stale when its scans run late); -1: never.
	AllOKAfterHeal time.Duration

	// Logs: lines per second per node over the partition and heal (the worst node), and the
	// node that wrote them.
	LogRate     float64
	LogRateNode string
	LogTotal    int

	// Scans on time: every node's scan periods (from its own history, ScanPeriods) in the
	// steady state (from the end of the settling to the cut) and through the partition and
	// its heal (from the cut to the end).
	ScansSteady, ScansDisturbed ScanStats

	Load float64 // 1-minute load average at the end
}

// QueryStats are the cluster queries at node 1 during a phase.
type QueryStats struct {
	Metrics, History []time.Duration
	HistoryBytes     int
	Errors           []string
	// Slow lists the queries over a second: which, how long (at the client, and at node 1 from
	// its Server-Timing: the whole answer, the hub's query), and when from the phase's start.
	Slow []string
	// The slowest metrics and history query of the phase, the same way.
	SlowestMetrics, SlowestHistory Slowest
	start                          time.Time
}

// Slowest is one query: how long at the client (Took), at node 1 (Server: its whole answer;
// Peers: the hub's query within it; -1: not said), and when it started from its phase's start;
// and, over the query, how long node 1's threads and this process's (the querier's) waited
// on a run queue (schedstat, summed over threads): a query slow because the machine's CPUs
// were taken shows there.
type Slowest struct {
	Took, Server, Peers, At time.Duration
	Node1Wait, SelfWait     time.Duration
}

func (s Slowest) String() string {
	return fmt.Sprintf("%s (node 1: %s, hub %s; run-queue wait node 1 %s, querier %s) at +%s",
		r(s.Took), r(s.Server), r(s.Peers), r(s.Node1Wait), r(s.SelfWait), r(s.At))
}

// record adds a query to the phase's slowest and slow lists.
func (q *QueryStats) record(what string, a Answer, at time.Duration, w waits) {
	sl := Slowest{Took: a.Took, Server: a.Server, Peers: a.Peers, At: at, Node1Wait: w.node1, SelfWait: w.self}
	top := &q.SlowestMetrics
	if what == "history" {
		top = &q.SlowestHistory
	}
	if a.Took > top.Took {
		*top = sl
	}
	if a.Took > time.Second {
		q.Slow = append(q.Slow, what+" "+sl.String())
	}
}

// MaxMetrics and the others summarise QueryStats.
func (q QueryStats) MaxMetrics() time.Duration { return Quantile(q.Metrics, 1) }
func (q QueryStats) MaxHistory() time.Duration { return Quantile(q.History, 1) }

// String formats q.
func (q QueryStats) String() string {
	slow := ""
	if len(q.Slow) > 0 {
		slow = "; slow: " + strings.Join(q.Slow, ", ")
	}
	return fmt.Sprintf("metrics n=%d p50 %s p99 %s max %s; history n=%d p50 %s p99 %s max %s (%d B); %d errors; slowest metrics %v, history %v%s",
		len(q.Metrics), r(Quantile(q.Metrics, .5)), r(Quantile(q.Metrics, .99)), r(Quantile(q.Metrics, 1)),
		len(q.History), r(Quantile(q.History, .5)), r(Quantile(q.History, .99)), r(Quantile(q.History, 1)), q.HistoryBytes, len(q.Errors),
		q.SlowestMetrics, q.SlowestHistory, slow)
}

func r(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

func (s *Scenario) defaults() {
	if s.Match == "" {
		s.Match = "system.load_avg_1min"
	}
	if s.Window == "" {
		s.Window = "5m"
	}
	if s.Steady <= 0 {
		s.Steady = 10 * time.Second
	}
	if s.Partition <= 0 {
		s.Partition = 60 * time.Second
	}
	if s.AfterHeal <= 0 {
		s.AfterHeal = 5 * time.Second
	}
	if s.Converge <= 0 {
		s.Converge = 2 * time.Minute
	}
	if s.HealPoll <= 0 {
		s.HealPoll = 100 * time.Millisecond
	}
	if s.Logf == nil {
		s.Logf = func(string, ...any) {}
	}
}

// querier queries node 1 in a loop (metrics, then history) and records into the current phase.
type querier struct {
	s    *Scenario
	at   *Node
	mu   sync.Mutex
	cur  *QueryStats
	hook func(Answer) // called with every metrics answer, under mu
}

func (q *querier) run(ctx context.Context) {
	for ctx.Err() == nil {
		q.mu.Lock()
		paused := q.cur == nil
		q.mu.Unlock()
		if paused {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		mAt := time.Now()
		w0 := q.waits()
		ma, merr := q.at.Cluster(qctx, "/api/v1/cluster/metrics", q.s.Match)
		w1 := q.waits()
		hAt := time.Now()
		ha, herr := q.at.Cluster(qctx, "/api/v1/cluster/history", q.s.Match, "window", q.s.Window)
		w2 := q.waits()
		cancel()
		if ctx.Err() != nil {
			return
		}
		q.mu.Lock()
		if c := q.cur; c != nil {
			if merr != nil {
				c.Errors = append(c.Errors, merr.Error())
			} else {
				c.Metrics = append(c.Metrics, ma.Took)
				c.record("metrics", ma, mAt.Sub(c.start), w1.sub(w0))
				if q.hook != nil {
					q.hook(ma)
				}
			}
			if herr != nil {
				c.Errors = append(c.Errors, herr.Error())
			} else {
				c.History = append(c.History, ha.Took)
				c.record("history", ha, hAt.Sub(c.start), w2.sub(w1))
				c.HistoryBytes = max(c.HistoryBytes, ha.Bytes)
			}
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waits are run-queue waits so far: node 1's threads', this process's.
type waits struct{ node1, self time.Duration }

func (w waits) sub(o waits) waits { return waits{w.node1 - o.node1, w.self - o.self} }

func (q *querier) waits() waits {
	_, n1, _ := q.at.Sched()
	_, self, _ := SelfSched()
	return waits{n1, self}
}

// phase makes the querier record into a new QueryStats, and returns the previous one.
func (q *querier) phase(next *QueryStats, hook func(Answer)) {
	if next != nil {
		next.start = time.Now()
	}
	q.mu.Lock()
	q.cur, q.hook = next, hook
	q.mu.Unlock()
}

// Run runs the scenario on f, whose agents were just started.
func (s *Scenario) Run(ctx context.Context, f *Fleet) (*Report, error) {
	s.defaults()
	rep := &Report{N: len(f.Nodes)}
	if len(f.Nodes) < 4 {
		return nil, fmt.Errorf("fleet: a scenario needs 4 nodes or more")
	}
	a, base := f.Nodes[0], f.Nodes[1]
	started := time.Now()
	if d, err := f.WaitScanned(ctx, s.Converge); err != nil {
		return rep, fmt.Errorf("first scans: %w", err)
	} else {
		s.Logf("all %d agents scanned %s after the last start", len(f.Nodes), r(d))
	}
	var err error
	lastLog := time.Now()
	if rep.Converged, err = Poll(ctx, s.Converge, 250*time.Millisecond, func() error {
		err := AllKnow(ctx, f.Nodes, nil)
		if err != nil && time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			s.Logf("converging: %s", strings.SplitN(err.Error(), "\n", 4)[:min(3, len(strings.SplitN(err.Error(), "\n", 4)))])
		}
		return err
	}); err != nil {
		return rep, fmt.Errorf("convergence: %w", err)
	}
	rep.Converged = time.Since(started) // from the last start, to within the polling
	s.Logf("converged: all %d list all alive %s after the last agent's start", len(f.Nodes), r(rep.Converged))

	// First queries at node 1: new subscriptions to every peer.
	c0, err := a.SchedCPU()
	if err != nil {
		return rep, err
	}
	ma, err := a.Cluster(ctx, "/api/v1/cluster/metrics", s.Match)
	if err != nil {
		return rep, err
	}
	c1, err := a.SchedCPU()
	if err != nil {
		return rep, err
	}
	rep.FirstMetrics, rep.FirstNotOK, rep.FirstMetricsCPU = ma.Took, ma.NotOK(f.Nodes), c1-c0
	ha, err := a.Cluster(ctx, "/api/v1/cluster/history", s.Match, "window", s.Window)
	if err != nil {
		return rep, err
	}
	rep.FirstHistory = ha.Took
	s.Logf("first cluster queries at %s: metrics %s (%d not ok; node 1 CPU %s, %s per peer), history %s; load %.1f", a.Name, r(rep.FirstMetrics), len(rep.FirstNotOK),
		r(rep.FirstMetricsCPU), rep.FirstMetricsCPU/time.Duration(len(f.Nodes)-1), r(rep.FirstHistory), LoadAvg())

	// A rejoin: the last node stops (goodbye), everyone sees it go, it starts again.
	last := f.Nodes[len(f.Nodes)-1]
	joinAt, err := f.Restart(ctx, last, func() error {
		_, err := Poll(ctx, s.Converge, 250*time.Millisecond, func() error {
			return Each(f.Nodes[:len(f.Nodes)-1], 16, func(n *Node) error {
				st, err := n.Peers(ctx)
				if err != nil {
					return err
				}
				if st[last.Name] == "alive" {
					return fmt.Errorf("%s still sees %s alive", n.Name, last.Name)
				}
				return nil
			})
		})
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("rejoin: %w", err)
	}
	if _, err = Poll(ctx, s.Converge, 100*time.Millisecond, func() error { return AllKnow(ctx, f.Nodes, nil) }); err != nil {
		return rep, fmt.Errorf("rejoin: %w", err)
	}
	others := f.Nodes[:len(f.Nodes)-1]
	l1, err1 := LastJoined(ctx, others, []*Node{last})
	l2, err2 := LastJoined(ctx, []*Node{last}, others)
	if err := errors.Join(err1, err2); err != nil {
		return rep, fmt.Errorf("rejoin: %w", err)
	}
	rep.Join = latest(l1, l2).Sub(joinAt)
	s.Logf("rejoin: %s restarted; all list all alive %s after its start", last.Name, r(rep.Join))

	qctx, stop := context.WithCancel(ctx)
	defer stop()
	q := &querier{s: s, at: a}
	var qwg sync.WaitGroup
	qwg.Add(1)
	go func() { defer qwg.Done(); q.run(qctx) }()
	defer qwg.Wait()
	defer stop()

	// Steady state, and the answering node's cost.
	q.phase(&rep.Steady, nil)
	// Let the subscriptions settle (the first answers' history chunks) before measuring.
	time.Sleep(2 * f.opts.Interval)
	scansFrom := time.Now()
	ua0, err1 := a.Usage()
	ub0, err2 := base.Usage()
	time.Sleep(s.Steady)
	ua1, err3 := a.Usage()
	ub1, err4 := base.Usage()
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return rep, err
		}
	}
	q.phase(nil, nil)
	intervals := float64(s.Steady) / float64(f.opts.Interval)
	rep.AnsweringCPU = time.Duration(float64(ua1.CPU-ua0.CPU) / intervals)
	rep.BaselineCPU = time.Duration(float64(ub1.CPU-ub0.CPU) / intervals)
	rep.AnsweringRSS, rep.BaselineRSS = ua1.RSS, ub1.RSS
	peers := float64(len(f.Nodes) - 1)
	rep.CPUPerPeerPerInterval = time.Duration(float64(rep.AnsweringCPU-rep.BaselineCPU) / peers)
	rep.RSSPerPeer = int64(float64(rep.AnsweringRSS-rep.BaselineRSS) / peers)
	s.Logf("steady: %v; node 1 CPU %s/interval (node 2: %s), RSS %d MiB (node 2: %d MiB)",
		rep.Steady, r(rep.AnsweringCPU), r(rep.BaselineCPU), rep.AnsweringRSS>>20, rep.BaselineRSS>>20)
	// The same without queries: what keeping the subscriptions (one update per peer and scan)
	// costs.
	ua0, err1 = a.Usage()
	ub0, err2 = base.Usage()
	time.Sleep(s.Steady)
	ua1, err3 = a.Usage()
	ub1, err4 = base.Usage()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return rep, err
	}
	rep.SubsCPU = time.Duration(float64(ua1.CPU-ua0.CPU) / intervals)
	rep.SubsBaselineCPU = time.Duration(float64(ub1.CPU-ub0.CPU) / intervals)
	rep.SubsCPUPerPeerPerInterval = time.Duration(float64(rep.SubsCPU-rep.SubsBaselineCPU) / peers)
	s.Logf("no queries: node 1 CPU %s/interval (node 2: %s): %s per peer and interval for the subscriptions alone",
		r(rep.SubsCPU), r(rep.SubsBaselineCPU), rep.SubsCPUPerPeerPerInterval)

	// Partition: the second half goes to its own bridge.
	half := len(f.Nodes) / 2
	sideA, sideB := f.Nodes[:half], f.Nodes[half:]
	logs0 := make([]int, len(f.Nodes))
	for i, n := range f.Nodes {
		logs0[i] = n.LogLines()
	}
	logStart := time.Now()
	notOKAt := map[string]time.Duration{}
	var cutAt time.Time
	q.phase(&rep.Cut, func(ans Answer) {
		for _, n := range sideB {
			if _, seen := notOKAt[n.Name]; !seen && ans.Nodes[n.Name].Status != "ok" {
				notOKAt[n.Name] = time.Since(cutAt)
			}
		}
	})
	var hb []*netns.Host
	for _, n := range sideB {
		hb = append(hb, n.Host)
	}
	q.mu.Lock()
	cutAt = time.Now()
	err = f.Lab.Partition(ctx, hb)
	q.mu.Unlock()
	if err != nil {
		return rep, err
	}
	s.Logf("partitioned: %d | %d nodes for %s", len(sideA), len(sideB), s.Partition)
	// Each side converges on its own: the other side is not alive anywhere.
	if _, err := Poll(ctx, s.Partition, 500*time.Millisecond, func() error {
		return AllKnow(ctx, sideA, sideB)
	}); err != nil {
		s.Logf("partition: side A did not see side B gone: %v", err)
	}
	if rest := s.Partition - time.Since(cutAt); rest > 0 {
		time.Sleep(rest)
	}
	q.phase(nil, nil)
	q.mu.Lock()
	for _, n := range sideB {
		if d, ok := notOKAt[n.Name]; ok {
			rep.CutNotOK = max(rep.CutNotOK, d)
		} else {
			rep.CutNotOKMissing = append(rep.CutNotOKMissing, n.Name)
		}
	}
	q.mu.Unlock()
	s.Logf("cut: %v; every node of the other half not ok at %s after %s (never: %v)", rep.Cut, a.Name, r(rep.CutNotOK), rep.CutNotOKMissing)

	// Heal.
	var healAt time.Time
	allOK := time.Duration(-1)
	rep.Heal.start = time.Now()
	q.mu.Lock()
	q.cur, q.hook = &rep.Heal, func(ans Answer) {
		if allOK < 0 && len(ans.Unreachable(f.Nodes[1:])) == 0 {
			allOK = time.Since(healAt)
		}
	}
	healAt = time.Now()
	err = f.Lab.HealPartition(ctx)
	q.mu.Unlock()
	if err != nil {
		return rep, err
	}
	profDone := make(chan struct{})
	go func() {
		defer close(profDone)
		if s.HealProfile == "" {
			return
		}
		if err := a.Profile(ctx, s.HealProfile, 6*time.Second); err != nil {
			s.Logf("heal profile: %v", err)
		}
	}()
	defer func() { <-profDone }()
	if _, err = Poll(ctx, s.Converge, s.HealPoll, func() error { return AllKnow(ctx, f.Nodes, nil) }); err != nil {
		return rep, fmt.Errorf("after the heal: %w", err)
	}
	l1, err1 = LastJoined(ctx, sideA, sideB)
	l2, err2 = LastJoined(ctx, sideB, sideA)
	if err := errors.Join(err1, err2); err != nil {
		return rep, fmt.Errorf("after the heal: %w", err)
	}
	rep.Whole = latest(l1, l2).Sub(healAt)
	// Queries go on until node 1 shows every node ok again (at most the convergence bound),
	// and AfterHeal more.
	Poll(ctx, s.Converge, 100*time.Millisecond, func() error {
		q.mu.Lock()
		defer q.mu.Unlock()
		if allOK < 0 {
			return fmt.Errorf("some node unreachable")
		}
		return nil
	})
	time.Sleep(s.AfterHeal)
	logTime := time.Since(logStart).Seconds()
	stop()
	qwg.Wait()
	end := time.Now()
	if rep.ScansSteady, err = MeasureScans(ctx, f.Nodes, f.opts.Interval, scansFrom, cutAt); err != nil {
		return rep, err
	}
	if rep.ScansDisturbed, err = MeasureScans(ctx, f.Nodes, f.opts.Interval, cutAt, end); err != nil {
		return rep, err
	}
	s.Logf("scans, steady state: %v", rep.ScansSteady)
	s.Logf("scans, partition and heal: %v", rep.ScansDisturbed)
	q.mu.Lock()
	rep.AllOKAfterHeal = allOK
	q.mu.Unlock()
	for i, n := range f.Nodes {
		lines := n.LogLines() - logs0[i]
		rep.LogTotal += lines
		if rate := float64(lines) / logTime; rate > rep.LogRate {
			rep.LogRate, rep.LogRateNode = rate, n.Name
		}
	}
	rep.Load = LoadAvg()
	s.Logf("heal: membership whole %s after the heal, node 1 reaches all again after %s; %v", r(rep.Whole), r(allOK), rep.Heal)
	s.Logf("logs: worst node %s %.2f lines/s over %.0f s; %d lines in all; load %.1f", rep.LogRateNode, rep.LogRate, logTime, rep.LogTotal, rep.Load)
	return rep, nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// LogSample returns up to n of the node's log lines written after the first skip lines.
func LogSample(n *Node, skip, lines int) string {
	all := strings.Split(n.Proc.Output(), "\n")
	if skip < len(all) {
		all = all[skip:]
	}
	return strings.Join(all[:min(len(all), lines)], "\n")
}
