package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// loadSel is a series every node has exactly one of.
const loadSel = "system.load_avg_1min"

// TestCluster runs five agents, one per namespace, through the life of a cluster: one peer added
// at a, cluster queries at two nodes, push to a WebSocket client with its traffic, a cut and
// heal of e's cable with backfill, and a crash. The steps build on each other, so the first
// failure stops the rest.
func TestCluster(t *testing.T) {
	t.Parallel() // two at a time (-parallel: GOMAXPROCS); each owns its lab (see harness_test.go)
	started := time.Now()
	lab := newLab(t, 5, "10.77.6")
	nodes := startNodes(t, lab)
	a, b, c, d, e := nodes[0], nodes[1], nodes[2], nodes[3], nodes[4]

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("OnePeerAtAConverges", func(t *testing.T) {
		took := formCluster(t, nodes, 10*time.Second, 10*time.Second)
		t.Logf("MEASURE convergence: e added at a → all 5 nodes list all others alive in %s", took.Round(time.Millisecond))
		ps, err := a.peers()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.HTTP == "" || p.Addr == "" || p.ID == "" {
				t.Errorf("a's peer %+v lacks its id, gossip or HTTP address", p)
			}
		}
	})

	step("QueryAtAnyNode", func(t *testing.T) {
		for _, at := range []*node{a, c} {
			var ans map[string]apiwire.ClusterMetricsNode
			took := waitFor(t, 10*time.Second, func() error {
				var err error
				ans, _, err = at.clusterMetrics(loadSel)
				if err != nil {
					return err
				}
				return allAnswered(ans, nodes, 1)
			})
			for _, n := range nodes {
				sr := ans[n.name].Series[0]
				if sr.Labels["node"] != n.name || sr.Labels["metric"] != loadSel || sr.Kind != "float" {
					t.Errorf("at %s: %s's series = %+v; want %s with node=%s", at.name, n.name, sr, loadSel, n.name)
				}
				// A point this run's agent took (how recent depends on the machine's load:
				// a starved agent's scan can lag by many intervals).
				if sr.TS < started.UnixMilli() || sr.TS > time.Now().UnixMilli() {
					t.Errorf("at %s: %s's latest point has ts %d, outside this test's run", at.name, n.name, sr.TS)
				}
			}
			t.Logf("MEASURE first cluster query at %s: all 5 nodes ok after %s", at.name, took.Round(time.Millisecond))
		}
		// An aggregate over the five nodes.
		var ans struct {
			Aggregate []struct {
				Nodes int     `json:"nodes"`
				Value float64 `json:"value"`
			}
		}
		if err := c.get("/api/v1/cluster/metrics?agg=sum&match="+loadSel, &ans); err != nil {
			t.Fatal(err)
		}
		if len(ans.Aggregate) != 1 || ans.Aggregate[0].Nodes != 5 {
			t.Errorf("agg=sum at c = %+v; want one aggregate over 5 nodes", ans.Aggregate)
		}
	})

	step("PushToClusterSubscriber", func(t *testing.T) { pushAndTraffic(t, nodes) })

	step("CutAndHeal", func(t *testing.T) { cutAndHeal(t, nodes) })

	step("KillMarksDead", func(t *testing.T) {
		killed := time.Now()
		d.proc.Kill()
		others := []*node{a, b, c, e}
		took := waitFor(t, 30*time.Second, func() error {
			for _, n := range others {
				st, err := n.peerStatus()
				if err != nil {
					return err
				}
				if st[d.name] != "dead" {
					return fmt.Errorf("%s sees %s as %q", n.name, d.name, st[d.name])
				}
			}
			return nil
		})
		t.Logf("MEASURE kill detection: SIGKILLed %s is dead in the peers of a, b, c, e after %s", d.name, took.Round(time.Millisecond))
		// The survivors still answer, with d not ok and without waiting for it.
		ans, dur, err := a.clusterMetrics(loadSel)
		if err != nil {
			t.Fatal(err)
		}
		if got := ans[d.name].Status; got == "ok" {
			t.Errorf("a reports killed %s as ok %s after the kill", d.name, time.Since(killed))
		}
		if err := allAnswered(ans, []*node{a, b, c, e}, 1); err != nil {
			t.Errorf("after killing d: %v", err)
		}
		if dur > 3*time.Second {
			t.Errorf("cluster query at a took %s with d dead; want it bounded by the 1 s peer timeout", dur)
		}
	})
}

// formCluster joins nodes through the API only (no --peer flags). One request joins two nodes,
// so a cluster of isolated agents cannot come from a single request: first b joins a, c joins
// b, d joins c (each POST names one neighbour, so a..d knowing each other already needs gossip),
// then the step under test — the seed's "add a peer address at any node and every node will
// know it" — adds the last node at a alone, after which every node must list every other as
// alive within bound. It returns how long that took from the last request.
func formCluster(t *testing.T, nodes []*node, setupBound, bound time.Duration) time.Duration {
	t.Helper()
	last := nodes[len(nodes)-1]
	start := time.Now()
	for i := 1; i < len(nodes)-1; i++ {
		retry(t, 20*time.Second, func() error { return nodes[i].addPeer(nodes[i-1].gaddr) })
	}
	setup := waitFor(t, setupBound, func() error { return allKnowAll(nodes[:len(nodes)-1]) })
	t.Logf("setup: %d nodes joined in a chain know each other %s after the first request, %s after the last",
		len(nodes)-1, time.Since(start).Round(time.Millisecond), setup.Round(time.Millisecond))
	added := time.Now()
	retry(t, 20*time.Second, func() error { return nodes[0].addPeer(last.gaddr) })
	waitFor(t, bound, func() error { return allKnowAll(nodes) })
	return time.Since(added)
}

// retry calls f until it succeeds, at most for d, logging failed attempts.
func retry(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	attempt := 0
	waitFor(t, d, func() error {
		attempt++
		err := f()
		if err != nil {
			t.Logf("attempt %d: %v", attempt, err)
		}
		return err
	})
}

// allAnswered reports nil when ans has every one of nodes answering with at least want series:
// status ok, or stale (its stream missed an interval: on a loaded machine an agent's scan of
// the whole machine often runs later than 1.5 intervals), never unreachable.
func allAnswered[N clusterNode](ans map[string]N, nodes []*node, want int) error {
	for _, n := range nodes {
		cn, ok := ans[n.name]
		h, count := headOf(cn)
		if !ok || (h.Status != "ok" && h.Status != "stale") || count < want {
			return fmt.Errorf("want %d+ series from each node, ok or stale; got %s", want, summary(ans))
		}
	}
	return nil
}

// pushAndTraffic subscribes a client at a to a cluster selector over WebSocket, checks that
// every node's updates arrive, reports the delay from each update's scan timestamp to its
// arrival, and measures the traffic the subscription causes per series and node.
func pushAndTraffic(t *testing.T, nodes []*node) {
	a := nodes[0]
	const sel = `{metric=~"system\\..*"}`

	// Baseline: each peer's eth0 traffic without this subscription (gossip, probes, and the
	// one-series subscriptions of the earlier queries).
	const window = 6 * time.Second
	base := trafficOver(t, nodes[1:], window)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+a.gaddr+"/api/v1/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: a.tr}})
	if err != nil {
		t.Fatalf("websocket at a: %v", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	req, _ := json.Marshal(map[string]string{"type": "subscribe", "id": "rm", "match": sel, "scope": "cluster"})
	if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
		t.Fatal(err)
	}

	type arrival struct {
		node    string
		delay   time.Duration
		nseries int
		at      time.Time
	}
	var (
		mu       sync.Mutex
		arrivals []arrival
		readErr  error
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			_, data, err := conn.Read(ctx)
			now := time.Now()
			if err != nil {
				mu.Lock()
				readErr = err
				mu.Unlock()
				return
			}
			var m apiwire.WSFrame
			if err := json.Unmarshal(data, &m); err != nil {
				mu.Lock()
				readErr = fmt.Errorf("bad message %q: %w", data, err)
				mu.Unlock()
				return
			}
			mu.Lock()
			switch m.Type {
			case "error":
				readErr = fmt.Errorf("subscription error: %s", m.Error)
			case "update":
				arrivals = append(arrivals, arrival{m.Node, now.Sub(time.UnixMilli(m.TS)), len(m.Series), now})
			}
			mu.Unlock()
		}
	}()
	seen := func() (map[string]int, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for _, ar := range arrivals {
			out[ar.node]++
		}
		return out, readErr
	}
	took := waitFor(t, 10*time.Second, func() error {
		got, err := seen()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if got[n.name] < 2 {
				return fmt.Errorf("updates per node so far: %v; want 2+ from each of the 5", got)
			}
		}
		return nil
	})
	t.Logf("updates from all 5 nodes arrived %s after subscribing", took.Round(time.Millisecond))

	// Steady state: the peers' traffic with the subscription, the client's bytes, and the
	// push delays of the updates that arrive meanwhile.
	mu.Lock()
	from := len(arrivals)
	mu.Unlock()
	rx0 := a.rxBytes.Load()
	withSub := trafficOver(t, nodes[1:], window)
	rx1 := a.rxBytes.Load()
	mu.Lock()
	steady := append([]arrival(nil), arrivals[from:]...)
	err = readErr
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(websocket.StatusNormalClosure, "")
	cancel()
	<-readDone

	perNode := map[string][]time.Duration{}
	nseries := map[string]int{}
	var all []time.Duration
	for _, ar := range steady {
		perNode[ar.node] = append(perNode[ar.node], ar.delay)
		nseries[ar.node] = max(nseries[ar.node], ar.nseries)
		all = append(all, ar.delay)
	}
	for _, n := range nodes {
		// Only that they arrive: a loaded CI machine may delay scans.
		if len(perNode[n.name]) < 2 {
			t.Errorf("only %d updates from %s in %s at interval %s", len(perNode[n.name]), n.name, window, interval)
		}
		if nseries[n.name] < 5 {
			t.Errorf("updates from %s carry %d series; want every system.* series", n.name, nseries[n.name])
		}
	}
	var lines []string
	for _, n := range nodes {
		ds := perNode[n.name]
		lines = append(lines, fmt.Sprintf("%s: n=%d p50=%s p90=%s max=%s", n.name, len(ds),
			quantile(ds, 0.5), quantile(ds, 0.9), quantile(ds, 1)))
	}
	t.Logf("MEASURE push delay (client at a receives update; delay = arrival - update ts, target ≤ 100ms): all p50=%s p90=%s max=%s; %s",
		quantile(all, 0.5), quantile(all, 0.9), quantile(all, 1), strings.Join(lines, "; "))

	// Traffic: what each peer sends beyond the baseline, per series of the subscription.
	secs := window.Seconds()
	var sum float64
	var parts []string
	for i, n := range nodes[1:] {
		extra := float64(withSub[i]-base[i]) / secs
		per := extra / float64(nseries[n.name])
		sum += per
		parts = append(parts, fmt.Sprintf("%s: %d series, %.0f B/s over baseline %.0f B/s → %.1f B/s/series",
			n.name, nseries[n.name], extra, float64(base[i])/secs, per))
	}
	total := 0
	for _, k := range nseries {
		total += k
	}
	client := float64(rx1-rx0) / secs
	t.Logf("MEASURE traffic per subscribed series per node (peer eth0 tx, interval %s): mean %.1f B/s/series; %s; client at a receives %.0f B/s for %d series of 5 nodes = %.1f B/s/series",
		interval, sum/float64(len(nodes)-1), strings.Join(parts, "; "), client, total, client/float64(total))
	if sum <= 0 {
		t.Errorf("the subscription caused no traffic at the peers (baseline %v, with it %v)", base, withSub)
	}
}

// trafficOver returns the bytes each node's eth0 transmitted during d.
func trafficOver(t *testing.T, nodes []*node, d time.Duration) []int64 {
	t.Helper()
	start := make([]int64, len(nodes))
	for i, n := range nodes {
		_, tx, err := netDev(n.proc.Pid())
		if err != nil {
			t.Fatal(err)
		}
		start[i] = tx
	}
	time.Sleep(d)
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		_, tx, err := netDev(n.proc.Pid())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = tx - start[i]
	}
	return out
}

// cutAndHeal cuts e's cable, expects a to report e unreachable within 10 s while a..d stay ok
// and answers stay fast, heals it, expects e back, and checks that a's cluster history has
// every point e took during the cut.
func cutAndHeal(t *testing.T, nodes []*node) {
	a, e := nodes[0], nodes[4]
	ctx := context.Background()
	// a's subscription to e is live before the cut.
	waitFor(t, 10*time.Second, func() error {
		ans, _, err := a.clusterMetrics(loadSel)
		if err != nil {
			return err
		}
		return allAnswered(ans, nodes, 1)
	})
	// a has e's history before the cut. A peer whose scan runs late on a loaded machine is
	// stale for a moment (its stream missed an interval), so this waits for an answer with all
	// ok, as the metrics query above does.
	waitFor(t, 10*time.Second, func() error {
		ans, _, err := a.clusterHistory(loadSel, "window", "1m")
		if err != nil {
			return err
		}
		if err := allAnswered(ans, nodes, 1); err != nil {
			return fmt.Errorf("cluster history at a before the cut: %w", err)
		}
		return nil
	})

	cutAt := time.Now()
	if err := e.host.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	healed := false
	defer func() {
		if !healed {
			e.host.Heal(ctx)
		}
	}()
	// Cluster history during the cut does not wait for e beyond the peer timeout either.
	hans, htook, err := a.clusterHistory(loadSel, "window", "1m")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE cluster history at a just after the cut: %s, e %s", htook.Round(time.Millisecond), hans[e.name].Status)
	if htook > 3*time.Second {
		t.Errorf("cluster history at a took %s with e cut; want it bounded by the 1 s peer timeout", htook)
	}
	// a..d answer with their points, ok or, when a scan ran late, stale; never unreachable.
	for _, n := range nodes[:4] {
		if cn := hans[n.name]; cn.Status == "unreachable" || len(cn.Series) < 1 {
			t.Errorf("cluster history during the cut: %s = %s with %d series; want its series, ok or stale (%s)", n.name, cn.Status, len(cn.Series), summary(hans))
		}
	}
	var slowest, firstNotOK, unreachable time.Duration
	othersNotOK := 0
	waitFor(t, 10*time.Second, func() error {
		ans, took, err := a.clusterMetrics(loadSel)
		if err != nil {
			return err
		}
		slowest = max(slowest, took)
		if took > 3*time.Second {
			t.Errorf("cluster query at a took %s during the cut; want it bounded by the 1 s peer timeout", took)
		}
		st := ans[e.name].Status
		if st != "ok" && firstNotOK == 0 {
			firstNotOK = time.Since(cutAt)
		}
		if st != "unreachable" {
			return fmt.Errorf("e is %q at a: %s", st, summary(ans))
		}
		if unreachable == 0 {
			unreachable = time.Since(cutAt)
		}
		// A scan delayed by a loaded machine may make a peer stale for a moment; what must
		// hold is an answer with e unreachable and a..d ok.
		if err := allAnswered(ans, nodes[:4], 1); err != nil {
			othersNotOK++
			return fmt.Errorf("e is unreachable but not all others are ok: %w", err)
		}
		return nil
	})
	t.Logf("MEASURE unreachable detection (from the cut): e not ok at a after %s, unreachable after %s; slowest query during the cut %s; %d answers had a peer of a..d not ok",
		firstNotOK.Round(time.Millisecond), unreachable.Round(time.Millisecond), slowest.Round(time.Millisecond), othersNotOK)
	if unreachable > 10*time.Second {
		t.Errorf("e reported unreachable %s after the cut; want within 10 s", unreachable)
	}
	if t.Failed() {
		return
	}

	// Keep e cut a while longer so that it scans several times alone, and check it does: its
	// own API answers inside its namespace, with four more scans than at first (waited for
	// with a deadline: a loaded machine delays scans).
	scans := func() (int, error) {
		var st struct {
			LastScan struct{ Scans int } `json:"last_scan"`
		}
		err := e.get("/api/v1/status", &st)
		return st.LastScan.Scans, err
	}
	s0, err := scans()
	if err != nil {
		t.Fatalf("e's own API during the cut: %v", err)
	}
	waitFor(t, 30*time.Second, func() error {
		s, err := scans()
		if err != nil {
			return fmt.Errorf("e's own API during the cut: %w", err)
		}
		if s < s0+4 {
			return fmt.Errorf("e made %d scans alone; want 4", s-s0)
		}
		return nil
	})

	healAt := time.Now()
	if err := e.host.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	back := waitFor(t, 30*time.Second, func() error {
		ans, _, err := a.clusterMetrics(loadSel)
		if err != nil {
			return err
		}
		return allAnswered(ans, nodes, 1)
	})
	t.Logf("MEASURE heal: cut lasted %s; e ok again at a %s after the heal", healAt.Sub(cutAt).Round(time.Millisecond), back.Round(time.Millisecond))
	rejoin := waitFor(t, 30*time.Second, func() error { return allKnowAll(nodes) })
	t.Logf("MEASURE heal: membership whole again (all alive everywhere) %s after that", rejoin.Round(time.Millisecond))

	// Backfill: a's cluster history over a window covering the cut has every point e has for
	// the cut period, and e took them at its usual pace.
	window := (time.Since(cutAt) + 10*time.Second).Round(time.Second)
	ans, _, err := a.clusterHistory(loadSel, "window", window.String())
	if err != nil {
		t.Fatal(err)
	}
	if (ans[e.name].Status != "ok" && ans[e.name].Status != "stale") || len(ans[e.name].Series) != 1 {
		t.Fatalf("cluster history at a: e = %+v; want ok (or stale) with one series", ans[e.name])
	}
	var own apiwire.HistoryAnswer
	if err := e.get("/api/v1/history?window="+window.String()+"&match="+loadSel, &own); err != nil {
		t.Fatal(err)
	}
	if len(own.Series) != 1 {
		t.Fatalf("e's own history has %d series of %s; want 1", len(own.Series), loadSel)
	}
	inCut := func(pts []apiwire.Point) map[int64]float64 {
		out := map[int64]float64{}
		for _, p := range pts {
			if p.TS >= cutAt.UnixMilli() && p.TS <= healAt.UnixMilli() {
				out[p.TS] = p.Value.F
			}
		}
		return out
	}
	want := inCut(own.Series[0].Points)
	got := inCut(ans[e.name].Series[0].Points)
	cut := healAt.Sub(cutAt)
	// e kept scanning alone (how often depends on the machine's load: a starved scan takes
	// longer than the interval).
	if len(want) < 2 {
		t.Errorf("e's own history has %d points from the %s cut; want it to have kept scanning", len(want), cut)
	}
	var missing []int64
	for ts, v := range want {
		if g, ok := got[ts]; !ok || (g != v && !(math.IsNaN(g) && math.IsNaN(v))) {
			missing = append(missing, ts)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	if len(missing) > 0 {
		t.Errorf("a's cluster history lacks or differs at %d of e's %d points taken during the cut: %v", len(missing), len(want), missing)
	}
	t.Logf("backfill: a's cluster history has all %d points e took during the %s cut", len(want), cut.Round(time.Millisecond))
}
