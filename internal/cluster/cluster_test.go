package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/cantal-go/cantal/internal/statedir"
	"github.com/cantal-go/cantal/internal/testsupport/memnet"
)

// fastTune shortens memberlist's timers so tests converge and detect failures in about a second,
// with margins that survive -race on a loaded two-core machine.
func fastTune(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 150 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = time.Second
	c.SuspicionMult = 2
	c.GossipToTheDeadTime = time.Second
	c.TCPTimeout = time.Second
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// testConfig returns a config for a node on loopback with its own TCP stream listener.
func testConfig(t *testing.T, name, cluster string) Config {
	cfg := DefaultConfig()
	cfg.NodeName = name
	cfg.NodeID = name
	cfg.ClusterName = cluster
	cfg.BindAddr = "127.0.0.1:0"
	cfg.StreamsViaHTTP = false
	cfg.HTTPAddr = "127.0.0.1:8" + fmt.Sprint(len(name))
	cfg.Version = "test-1"
	cfg.Logger = testLogger(t)
	cfg.ReconnectInterval = 200 * time.Millisecond
	cfg.PersistInterval = 100 * time.Millisecond
	cfg.JoinTimeout = time.Second
	cfg.Tune = fastTune
	return cfg
}

func start(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.NodeName, err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c
}

func runBackground(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitFor polls cond until it returns "" or the timeout passes, then fails with its last answer.
func waitFor(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func peerMap(c *Cluster) map[string]Peer {
	m := map[string]Peer{}
	for _, p := range c.Peers() {
		m[p.ID] = p
	}
	return m
}

// statusIs answers whether every node sees exactly the given peers with the given statuses.
func statusIs(nodes []*Cluster, want map[string]Status) func() string {
	return func() string {
		for _, n := range nodes {
			got := peerMap(n)
			for id, st := range want {
				if id == n.ID() {
					continue
				}
				if got[id].Status != st {
					return fmt.Sprintf("%s sees %s as %q, want %q (peers %v)", n.ID(), id, got[id].Status, st, n.Peers())
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					return fmt.Sprintf("%s sees unexpected peer %s", n.ID(), id)
				}
			}
		}
		return ""
	}
}

func TestJoinPeersMetadataRTT(t *testing.T) {
	a := start(t, testConfig(t, "a", "test"))
	b := start(t, testConfig(t, "b", "test"))
	c := start(t, testConfig(t, "c", "test"))
	if n, err := b.Join(a.Local().Addr); n != 1 || err != nil {
		t.Fatalf("b.Join(a) = %d, %v; want 1, nil", n, err)
	}
	// c joins b only: it must learn a through gossip.
	if n, err := c.Join(b.Local().Addr); n != 1 || err != nil {
		t.Fatalf("c.Join(b) = %d, %v; want 1, nil", n, err)
	}
	all := []*Cluster{a, b, c}
	waitFor(t, 5*time.Second, statusIs(all, map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusAlive}))

	// a's view of c carries c's metadata and, after a few probes, an RTT.
	waitFor(t, 5*time.Second, func() string {
		p := peerMap(a)["c"]
		if p.RTT <= 0 || p.LastSeen.IsZero() {
			return fmt.Sprintf("a sees c with RTT %v, last seen %v", p.RTT, p.LastSeen)
		}
		return ""
	})
	p := peerMap(a)["c"]
	want := Peer{ID: "c", Name: "c", Addr: c.Local().Addr, HTTP: "127.0.0.1:81", Version: "test-1", Status: StatusAlive}
	if p.ID != want.ID || p.Name != want.Name || p.Addr != want.Addr || p.HTTP != want.HTTP || p.Version != want.Version {
		t.Errorf("a sees c as %+v; want %+v", p, want)
	}
	if p.RTT > time.Second {
		t.Errorf("RTT to c on loopback = %v; want under a second", p.RTT)
	}
	for _, q := range a.Peers() {
		if q.ID == a.ID() {
			t.Errorf("a.Peers() lists a itself")
		}
	}
	if l := a.Local(); l.ID != "a" || l.Status != StatusAlive || l.HTTP != "127.0.0.1:81" {
		t.Errorf("a.Local() = %+v", l)
	}
}

func TestLeaveAndFailure(t *testing.T) {
	a := start(t, testConfig(t, "a", "test"))
	b := start(t, testConfig(t, "b", "test"))
	c := start(t, testConfig(t, "c", "test"))
	if _, err := b.Join(a.Local().Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(a.Local().Addr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b, c}, map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusAlive}))

	// b says goodbye: a and c list it as left.
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatalf("b.Leave: %v", err)
	}
	if err := b.Leave(time.Second); err != nil {
		t.Errorf("second b.Leave: %v", err)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatalf("b.Shutdown: %v", err)
	}
	if err := b.Shutdown(); err != nil {
		t.Errorf("second b.Shutdown: %v", err)
	}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, c}, map[string]Status{"a": StatusAlive, "b": StatusLeft, "c": StatusAlive}))

	// c dies without a word: a finds it dead.
	if err := c.Shutdown(); err != nil {
		t.Fatalf("c.Shutdown: %v", err)
	}
	waitFor(t, 10*time.Second, statusIs([]*Cluster{a}, map[string]Status{"b": StatusLeft, "c": StatusDead}))
	if p := peerMap(a)["c"]; p.LastSeen.IsZero() {
		t.Errorf("dead peer c has no last_seen")
	}
}

func TestClusterNameIsolation(t *testing.T) {
	a := start(t, testConfig(t, "a", "blue"))
	b := start(t, testConfig(t, "b", "blue"))
	x := start(t, testConfig(t, "x", "green"))
	if _, err := b.Join(a.Local().Addr); err != nil {
		t.Fatal(err)
	}
	if n, err := x.Join(a.Local().Addr); err == nil || n != 0 {
		t.Errorf("green x.Join(blue a) = %d, %v; want 0 and an error", n, err)
	}
	if n, err := a.Join(x.Local().Addr); err == nil || n != 0 {
		t.Errorf("blue a.Join(green x) = %d, %v; want 0 and an error", n, err)
	}
	// A node that forges the label but announces another cluster in its metadata is refused by
	// the metadata check.
	forged := testConfig(t, "f", "green")
	forged.Tune = func(c *memberlist.Config) { fastTune(c); c.Label = labelPrefix + "blue" }
	f := start(t, forged)
	if n, err := f.Join(a.Local().Addr); err == nil || n != 0 {
		t.Errorf("forged f.Join(a) = %d, %v; want 0 and an error", n, err)
	}
	// Give gossip time to leak, then check nobody crossed.
	time.Sleep(time.Second)
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b}, map[string]Status{"a": StatusAlive, "b": StatusAlive}))
	if p := x.Peers(); len(p) != 0 {
		t.Errorf("green x sees %v; want nobody", p)
	}
	if p := f.Peers(); len(p) != 0 {
		t.Errorf("forged f sees %v; want nobody", p)
	}
}

func writeKey(t *testing.T, keys ...[]byte) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test key\n")
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	}
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEncryption(t *testing.T) {
	k1 := []byte("0123456789abcdef0123456789abcdef")
	k2 := []byte("fedcba9876543210")
	key := writeKey(t, k1)
	cfgA := testConfig(t, "a", "sec")
	cfgA.KeyFile = key
	cfgB := testConfig(t, "b", "sec")
	cfgB.KeyFile = key
	a, b := start(t, cfgA), start(t, cfgB)
	if _, err := b.Join(a.Local().Addr); err != nil {
		t.Fatalf("encrypted b.Join(encrypted a): %v", err)
	}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b}, map[string]Status{"a": StatusAlive, "b": StatusAlive}))

	// Rotation, first step: a node that already accepts the next key but still sends with the
	// current one is a full member.
	cfgR := testConfig(t, "r", "sec")
	cfgR.KeyFile = writeKey(t, k1, k2)
	r := start(t, cfgR)
	if _, err := r.Join(a.Local().Addr); err != nil {
		t.Fatalf("rotating r.Join(a): %v", err)
	}
	members := map[string]Status{"a": StatusAlive, "b": StatusAlive, "r": StatusAlive}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b, r}, members))

	plain := start(t, testConfig(t, "p", "sec"))
	cfgW := testConfig(t, "w", "sec")
	cfgW.KeyFile = writeKey(t, k2)
	wrong := start(t, cfgW)
	for _, n := range []*Cluster{plain, wrong} {
		if got, err := n.Join(a.Local().Addr); err == nil || got != 0 {
			t.Errorf("%s.Join(a) = %d, %v; want 0 and an error", n.ID(), got, err)
		}
		if got, err := a.Join(n.Local().Addr); err == nil || got != 0 {
			t.Errorf("a.Join(%s) = %d, %v; want 0 and an error", n.ID(), got, err)
		}
	}
	time.Sleep(time.Second)
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b, r}, members))
	for _, n := range []*Cluster{plain, wrong} {
		if p := n.Peers(); len(p) != 0 {
			t.Errorf("%s sees %v; want nobody", n.ID(), p)
		}
	}
}

func TestPeersRememberedAcrossRestart(t *testing.T) {
	// The agent's way: the node id and the peers file's path come from the state directory.
	dirA, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dirA.Close()
	dirB, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfgA := testConfig(t, "a", "mem")
	cfgA.NodeID, cfgA.PeersFile = dirA.NodeID(), dirA.PeersFile()
	a := start(t, cfgA)
	runBackground(t, a)
	cfgB := testConfig(t, "b", "mem")
	cfgB.NodeID, cfgB.PeersFile = dirB.NodeID(), dirB.PeersFile()
	cfgB.Peers = []string{a.Local().Addr} // joined by Run
	b := start(t, cfgB)
	ctx, stopB := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	idA, idB := a.ID(), b.ID()
	if len(idA) != 16 || idA == idB {
		t.Fatalf("ids from state dirs: a %q, b %q; want 16 hex digits each, distinct", idA, idB)
	}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b}, map[string]Status{idA: StatusAlive, idB: StatusAlive}))
	addrB := b.Local().Addr
	stopB()
	if err := <-done; err != nil {
		t.Fatalf("b.Run: %v", err)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// The peers file names a; the restarted b has no --peer and must find a from it alone.
	st, err := readPeersState(dirB.PeersFile())
	if err != nil {
		t.Fatalf("read b's peers file: %v", err)
	}
	if len(st.Peers) != 1 || st.Peers[0].ID != idA || st.Peers[0].Addr != a.Local().Addr || st.Cluster != "mem" {
		t.Fatalf("b remembered %+v; want a at %s", st, a.Local().Addr)
	}
	waitFor(t, 10*time.Second, statusIs([]*Cluster{a}, map[string]Status{idB: StatusDead}))

	dirB.Close()
	dirB2, err := statedir.Open(dirB.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer dirB2.Close()
	cfgB2 := testConfig(t, "b", "mem")
	cfgB2.NodeID, cfgB2.PeersFile = dirB2.NodeID(), dirB2.PeersFile()
	cfgB2.BindAddr = addrB // same address, as a restarted agent has
	b2 := start(t, cfgB2)
	if b2.ID() != idB {
		t.Errorf("restarted b has id %q; want %q kept in its state dir", b2.ID(), idB)
	}
	if p := peerMap(b2)[idA]; p.Status != StatusDead || p.Addr != a.Local().Addr {
		t.Errorf("restarted b lists remembered a as %+v; want dead at %s until contacted", p, a.Local().Addr)
	}
	runBackground(t, b2)
	waitFor(t, 10*time.Second, statusIs([]*Cluster{a, b2}, map[string]Status{idA: StatusAlive, idB: StatusAlive}))
}

func TestStreamsViaHTTP(t *testing.T) {
	// The agent's layout: HTTP on TCP port P, gossip on UDP port P, streams through HTTP.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "h", "web")
	cfg.BindAddr = ln.Addr().String()
	cfg.HTTPAddr = ln.Addr().String()
	cfg.StreamsViaHTTP = true
	h := start(t, cfg)
	mux := http.NewServeMux()
	mux.Handle(GossipPath, h.StreamHandler())
	mux.HandleFunc("/api/v1/status", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{}")) })
	srv := &http.Server{Handler: mux, ReadTimeout: time.Second, WriteTimeout: time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	o := start(t, testConfig(t, "o", "web"))
	if _, err := o.Join(h.Local().Addr); err != nil {
		t.Fatalf("o.Join(h via HTTP): %v", err)
	}
	if _, err := h.Join(o.Local().Addr); err != nil {
		t.Fatalf("h.Join(o): %v", err)
	}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{h, o}, map[string]Status{"h": StatusAlive, "o": StatusAlive}))

	// A plain GET of the gossip path is refused with a JSON error, and the server still works.
	resp, err := http.Get("http://" + ln.Addr().String() + GossipPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET %s = %d; want 400", GossipPath, resp.StatusCode)
	}
}

func TestPartitionHealsThroughReconnect(t *testing.T) {
	var network memnet.Network
	var nodes []*Cluster
	for _, name := range []string{"a", "b", "c"} {
		tr, err := network.NewTransport("")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, name, "memnet")
		cfg.Transport = tr
		n := start(t, cfg)
		runBackground(t, n)
		nodes = append(nodes, n)
	}
	a, c := nodes[0], nodes[2]
	for _, n := range nodes[1:] {
		if _, err := n.Join(a.Local().Addr); err != nil {
			t.Fatal(err)
		}
	}
	alive := map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusAlive}
	waitFor(t, 5*time.Second, statusIs(nodes, alive))

	network.Cut(c.Local().Addr, true)
	waitFor(t, 10*time.Second, statusIs(nodes[:2], map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusDead}))
	waitFor(t, 10*time.Second, statusIs(nodes[2:], map[string]Status{"a": StatusDead, "b": StatusDead}))
	// memberlist alone never talks to dead nodes again; Run's reconnect merges the halves.
	network.Cut(c.Local().Addr, false)
	waitFor(t, 10*time.Second, statusIs(nodes, alive))
}

func TestPeerJSON(t *testing.T) {
	seen := time.UnixMilli(1700000000123)
	p := Peer{ID: "id1", Name: "n", Addr: "10.0.0.1:22682", HTTP: "10.0.0.1:22682", Status: StatusSuspect,
		RTT: 1500 * time.Microsecond, LastSeen: seen, Since: seen.Add(-time.Second)}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"id1","name":"n","addr":"10.0.0.1:22682","http":"10.0.0.1:22682","status":"suspect","rtt_ms":1.5,"last_seen":1700000000123,"since":1699999999123}`
	if string(b) != want {
		t.Errorf("json.Marshal(peer) = %s; want %s", b, want)
	}
	var back Peer
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != p {
		t.Errorf("round trip = %+v; want %+v", back, p)
	}
	b, _ = json.Marshal(Peer{ID: "x", Status: StatusDead})
	if !strings.Contains(string(b), `"rtt_ms":null`) || !strings.Contains(string(b), `"last_seen":0`) {
		t.Errorf("unmeasured peer JSON = %s; want rtt_ms null and last_seen 0", b)
	}
	if err := json.Unmarshal([]byte(`{"rtt_ms":"x"}`), &back); err == nil {
		t.Errorf("Unmarshal of bad rtt_ms succeeded")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"no cluster":    func(c *Config) { c.ClusterName = "" },
		"long cluster":  func(c *Config) { c.ClusterName = strings.Repeat("x", 300) },
		"bad id":        func(c *Config) { c.NodeID = "a b" },
		"bad bind":      func(c *Config) { c.BindAddr = "nowhere" },
		"missing key":   func(c *Config) { c.KeyFile = filepath.Join(t.TempDir(), "none") },
		"huge metadata": func(c *Config) { c.Version = strings.Repeat("v", 600) },
	} {
		cfg := testConfig(t, "n", "c")
		mod(&cfg)
		if c, err := New(cfg); err == nil {
			c.Shutdown()
			t.Errorf("New with %s succeeded", name)
		} else if !strings.HasPrefix(err.Error(), "cluster: ") {
			t.Errorf("New with %s: error %q lacks the package prefix", name, err)
		}
	}
}

func TestSuspectReported(t *testing.T) {
	var network memnet.Network
	var nodes []*Cluster
	for _, name := range []string{"a", "b", "c"} {
		tr, err := network.NewTransport("")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, name, "memnet")
		cfg.Transport = tr
		cfg.Tune = func(c *memberlist.Config) {
			fastTune(c)
			c.SuspicionMult = 10 // keep the suspicion long enough to watch
		}
		nodes = append(nodes, start(t, cfg))
	}
	for _, n := range nodes[1:] {
		if _, err := n.Join(nodes[0].Local().Addr); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, statusIs(nodes, map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusAlive}))
	network.Cut(nodes[2].Local().Addr, true)
	waitFor(t, 10*time.Second, func() string {
		for _, n := range nodes[:2] {
			if peerMap(n)["c"].Status == StatusSuspect {
				return ""
			}
		}
		return fmt.Sprintf("neither a nor b suspects c: %v, %v", nodes[0].Peers(), nodes[1].Peers())
	})
	waitFor(t, 20*time.Second, statusIs(nodes[:2], map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusDead}))
}

// TestScaleForSize: small clusters keep the agent's timing; larger ones get longer probe
// timeouts (below the probe interval) and, above 128 nodes, a wider gossip fan-out.
func TestScaleForSize(t *testing.T) {
	for _, c := range []struct {
		n       int
		timeout time.Duration
		fanout  int
	}{{1, 500 * time.Millisecond, 4}, {32, 500 * time.Millisecond, 4}, {64, 800 * time.Millisecond, 4},
		{150, 800 * time.Millisecond, 5}, {1000, 800 * time.Millisecond, 7}} {
		mc := memberlistConfig()
		scaleForSize(mc, c.n)
		if mc.ProbeTimeout != c.timeout || mc.GossipNodes != c.fanout || mc.ProbeInterval != time.Second {
			t.Errorf("n=%d: probe timeout %s, interval %s, fan-out %d; want %s, 1s, %d", c.n, mc.ProbeTimeout, mc.ProbeInterval, mc.GossipNodes, c.timeout, c.fanout)
		}
	}
	mc := memberlistConfig()
	scaleForSize(mc, 40)
	if mc.ProbeTimeout <= 500*time.Millisecond || mc.ProbeTimeout >= 800*time.Millisecond {
		t.Errorf("n=40: probe timeout %s; want between 500 and 800 ms", mc.ProbeTimeout)
	}
}

// TestSizeHintAtStart: a node started fresh with a few seeds gets the small-cluster settings
// unless told the size it will grow to (SizeHint, the agent's --cluster-size); with fewer
// remembered or seed peers than the hint the hint wins, with more they do.
func TestSizeHintAtStart(t *testing.T) {
	var network memnet.Network
	for _, c := range []struct {
		hint, seeds int
		timeout     time.Duration
		fanout      int
	}{{0, 3, 500 * time.Millisecond, 4}, {150, 3, 800 * time.Millisecond, 5}, {10, 200, 800 * time.Millisecond, 5}} {
		tr, err := network.NewTransport("")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, fmt.Sprint("h", c.hint), "memnet")
		cfg.Transport = tr
		cfg.SizeHint = c.hint
		for i := range c.seeds {
			cfg.Peers = append(cfg.Peers, fmt.Sprintf("10.9.%d.%d:22682", i/250, 1+i%250))
		}
		var got *memberlist.Config
		cfg.Tune = func(mc *memberlist.Config) { got = mc }
		n := start(t, cfg)
		if got == nil || got.ProbeTimeout != c.timeout || got.GossipNodes != c.fanout {
			t.Errorf("hint %d, %d seeds: memberlist config %+v; want probe timeout %s, fan-out %d", c.hint, c.seeds, got, c.timeout, c.fanout)
		}
		n.Shutdown()
	}
}
