package ingest

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cactus/go-statsd-client/v5/statsd"
	"github.com/cantal-go/cantal/internal/series"
)

// startStatsd serves statsd for p on a loopback UDP socket and a TCP listener on free ports,
// stopped when the test ends. It returns the two addresses.
func startStatsd(t testing.TB, p *Push) (udp, tcp string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeStatsdConn(ctx, pc, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeStatsdConn: %v", err)
		}
	})
	return pc.LocalAddr().String(), ln.Addr().String()
}

// waitLines waits until p has handled want statsd lines (accepted plus rejected).
func waitLines(t testing.TB, p *Push, want uint64, timeout time.Duration) Stats {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := p.Stats()
		if s.StatsdLines+s.StatsdRejected >= want || time.Now().After(deadline) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatsdRealClient sends with github.com/cactus/go-statsd-client, buffered (several
// metrics per datagram) and DogStatsD-tagged.
func TestStatsdRealClient(t *testing.T) {
	p, _ := newTestPush(Config{})
	udp, _ := startStatsd(t, p)
	c, err := statsd.NewClientWithConfig(&statsd.ClientConfig{
		Address: udp, Prefix: "app", UseBuffered: true, FlushInterval: 10 * time.Millisecond,
		TagFormat: statsd.SuffixOctothorpe,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.(*statsd.Client).SetSamplerFunc(func(float32) bool { return true }) // send every sampled stat
	env := statsd.Tag{"env", "prod"}
	steps := []error{
		c.Inc("hits", 3, 1, env),
		c.Inc("hits", 1, 0.5, env), // counts 2
		c.Dec("hits", 1, 1, env),
		c.Gauge("temp", 20, 1),
		c.GaugeDelta("temp", -3, 1),
		c.(*statsd.Client).GaugeFloat("ratio", 0.75, 1),
		c.Timing("lat", 10, 1),
		c.Timing("lat", 30, 1),
		c.TimingDuration("lat", 20*time.Millisecond, 1),
		c.Set("users", "alice", 1),
		c.Set("users", "bob", 1),
		c.SetInt("users", 7, 1),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s := waitLines(t, p, 12, 5*time.Second); s.StatsdLines != 12 || s.StatsdRejected != 0 {
		t.Fatalf("statsd stats = %+v; want 12 lines, 0 rejected", s)
	}
	if s := p.Stats(); s.StatsdPackets >= 12 {
		t.Logf("the buffered client sent %d datagrams for 12 stats (expected fewer)", s.StatsdPackets)
	}
	rec := collect(t, p)
	val := func(l series.Labels) (uint64, bool) { v, ok := rec.Values[l.Key()]; return v, ok }
	if v, _ := val(pl(series.Labels{"metric": "app.hits", "env": "prod"})); v != 4 {
		t.Errorf("app.hits{env=prod} = %d; want 3+2-1 = 4", v)
	}
	if v, _ := val(pl(series.Labels{"metric": "app.temp"})); fbits(v) != 17 {
		t.Errorf("app.temp = %v; want 17", fbits(v))
	}
	if v, _ := val(pl(series.Labels{"metric": "app.ratio"})); fbits(v) != 0.75 {
		t.Errorf("app.ratio = %v; want 0.75", fbits(v))
	}
	if v, _ := val(pl(series.Labels{"metric": "app.lat.median"})); fbits(v) != 20 {
		t.Errorf("app.lat.median = %v; want 20", fbits(v))
	}
	if v, _ := val(pl(series.Labels{"metric": "app.lat.count"})); v != 3 {
		t.Errorf("app.lat.count = %d; want 3", v)
	}
	if v, _ := val(pl(series.Labels{"metric": "app.users"})); v != 3 {
		t.Errorf("app.users = %d; want 3", v)
	}
}

// TestStatsdNetcat sends with the real `nc`, over UDP (-u) and TCP, including malformed lines.
func TestStatsdNetcat(t *testing.T) {
	nc, err := exec.LookPath("nc")
	if err != nil {
		t.Fatalf("nc not found (%v): run scripts/install-deps.sh", err)
	}
	p, _ := newTestPush(Config{})
	udp, tcp := startStatsd(t, p)
	run := func(input string, args ...string) {
		t.Helper()
		cmd := exec.Command(nc, args...)
		cmd.Stdin = strings.NewReader(input)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nc %v: %v\n%s", args, err, out)
		}
	}
	uhost, uport, _ := net.SplitHostPort(udp)
	run("nc.udp:5|c\nnc.gauge:2.5|g|#dc:eu\nthis is not statsd\nnc.t:7|ms|@0.5\n", "-u", "-w1", uhost, uport)
	thost, tport, _ := net.SplitHostPort(tcp)
	run("nc.tcp:1|c\nnc.tcp:2|c\nnc.bad:1|x\nnc.tcp:3|c", "-N", "-w2", thost, tport)
	s := waitLines(t, p, 8, 5*time.Second)
	if s.StatsdLines != 6 || s.StatsdRejected != 2 {
		t.Fatalf("stats = %+v; want 6 lines accepted, 2 rejected", s)
	}
	rec := collect(t, p)
	if v := rec.Values[pl(series.Labels{"metric": "nc.udp"}).Key()]; v != 5 {
		t.Errorf("nc.udp = %d; want 5", v)
	}
	if v := rec.Values[pl(series.Labels{"metric": "nc.tcp"}).Key()]; v != 6 {
		t.Errorf("nc.tcp = %d; want 6 (including the last line without newline)", v)
	}
	if v := rec.Values[pl(series.Labels{"metric": "nc.gauge", "dc": "eu"}).Key()]; fbits(v) != 2.5 {
		t.Errorf("nc.gauge{dc=eu} = %v; want 2.5", fbits(v))
	}
	if v := rec.Values[pl(series.Labels{"metric": "nc.t.count"}).Key()]; v != 2 {
		t.Errorf("nc.t.count = %d; want 2 (one value at rate 0.5)", v)
	}
	probs := rec.Problems["statsd"]
	if len(probs) != 1 || !strings.Contains(probs[0], "2 malformed") {
		t.Errorf("problems = %v; want one report of 2 malformed lines", probs)
	}
}

func TestServeStatsdAddr(t *testing.T) {
	p, _ := newTestPush(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeStatsd(ctx, "127.0.0.1:0") }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStatsd after cancel = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStatsd did not return after cancel")
	}
	if err := p.ServeStatsd(context.Background(), "not an address"); err == nil {
		t.Error("ServeStatsd(bad address) = nil; want error")
	}
}

func fbits(v uint64) float64 { return series.ToFloat(series.Float, v) }
