package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/testpki"
)

// What mutual TLS between cluster members costs (finding 10), plain and TLS side by side on the
// same five-node layout, in one process over loopback TCP: node 0 answers the user's cluster
// queries and subscribes to nodes 1..4, each an api.Server over its own registry of
// tlsBenchSeries series, served by an httptest server — plain HTTP, or TLS with a client
// certificate of the cluster CA required (RequireAndVerifyClientCert, ECDSA P-256, TLS 1.3), as
// the agent serves with a --web-config. The user's connection to node 0 is TLS too in the TLS
// case (kept alive, as a dashboard's).
//
//   - query=warm: GET /api/v1/cluster/metrics at node 0 with its subscriptions to the peers live
//     (the common case: the answer comes from what the peers pushed), the peers scanning and
//     pushing every second meanwhile.
//   - query=cold: the first query of a selector: node 0 dials the 4 peers (4 TLS handshakes
//     with client certificates), subscribes, receives their history chunks and answers.
//   - history: GET /api/v1/cluster/history at node 0: 4 fetches, each on a new connection (so
//     a dead peer costs one dial timeout), i.e. 4 TLS handshakes per query.
//   - ws-update: one scan at each of the 4 peers, until node 0's listener has the 4 updates:
//     the push path of a cluster WebSocket subscription (JSON over WSS).
//
// Each TLS sub-benchmark reports x-plain: its time over that of the same operation on a plain
// lab, run alternately with it (one plain op untimed before each timed TLS op), so that the
// ratio holds on a machine whose load drifts, where comparing the ns/op of two runs would not.
//
// Run:
//
//	cd bench && go test -run '^$' -bench ClusterTLS -benchtime 2s -count 3
func BenchmarkClusterTLS(b *testing.B) {
	for _, kind := range []string{"query=warm", "query=cold", "history", "ws-update"} {
		for _, secure := range []bool{false, true} {
			name := kind + "/tls=off"
			if secure {
				name = kind + "/tls=on"
			}
			b.Run(name, func(b *testing.B) {
				lab := newTLSLab(b, secure)
				defer lab.close()
				op := lab.benchOp(b, kind)
				defer op.close()
				var ref benchOp
				if secure {
					plain := newTLSLab(b, false)
					defer plain.close()
					ref = plain.benchOp(b, kind)
					defer ref.close()
				}
				b.ReportAllocs()
				b.ResetTimer()
				var plainTime time.Duration
				for range b.N {
					b.StopTimer()
					op.before()
					if secure {
						ref.before()
						t0 := time.Now()
						ref.run()
						plainTime += time.Since(t0)
					}
					b.StartTimer()
					op.run()
				}
				b.StopTimer()
				if secure {
					b.ReportMetric(float64(b.Elapsed())/float64(plainTime), "x-plain")
				}
			})
		}
	}
}

// benchOp is one operation of BenchmarkClusterTLS on a lab: before (untimed), then run.
type benchOp struct {
	before, run, close func()
}

func (l *tlsLab) benchOp(b *testing.B, kind string) benchOp {
	nop := func() {}
	metrics := "/api/v1/cluster/metrics?match=" + tlsBenchSel
	switch kind {
	case "query=warm":
		// The peers scan every second, as agents do, so that their data stays fresh.
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					for _, p := range l.peers {
						p.scan(now.UnixMilli())
					}
				}
			}
		}()
		l.query(b, metrics) // subscribe
		return benchOp{nop, func() { l.query(b, metrics) }, func() { stop(); wg.Wait() }}
	case "query=cold":
		return benchOp{l.newHub, func() { l.query(b, metrics) }, nop}
	case "history":
		return benchOp{nop, func() { l.query(b, "/api/v1/cluster/history?window=1m&match="+tlsBenchSel) }, nop}
	case "ws-update":
		round, stop := l.updates(b)
		return benchOp{nop, round, stop}
	}
	b.Fatalf("no operation %q", kind)
	return benchOp{}
}

const (
	tlsBenchPeers  = 4
	tlsBenchSeries = 100
	tlsBenchSel    = "bench.m"
)

type tlsPeer struct {
	reg  *registry.Registry
	refs []*series.Ref
	srv  *httptest.Server
	ts   int64
}

// scan writes one value of every series at ts.
func (p *tlsPeer) scan(ts int64) {
	p.ts = ts
	p.reg.Begin(ts)
	for i, r := range p.refs {
		p.reg.Put(r, math.Float64bits(float64(ts%1000)+float64(i)))
	}
	p.reg.Commit()
}

type tlsLab struct {
	secure  bool
	ca      *testpki.CA
	me      *testpki.Node
	peers   []*tlsPeer
	members []hub.Member

	mu     sync.Mutex
	hub    *hub.Hub
	stop   context.CancelFunc
	front  *httptest.Server // node 0's API
	client *http.Client     // the user's, kept alive
}

func newRegistry() *registry.Registry {
	return registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
}

func newTLSLab(b *testing.B, secure bool) *tlsLab {
	b.Helper()
	l := &tlsLab{secure: secure}
	var err error
	if l.ca, err = testpki.NewCA("bench cluster CA"); err != nil {
		b.Fatal(err)
	}
	if l.me, err = l.ca.NewNode("node0", net.IPv4(127, 0, 0, 1)); err != nil {
		b.Fatal(err)
	}
	now := time.Now().Add(-30 * time.Second).UnixMilli()
	for i := 1; i <= tlsBenchPeers; i++ {
		p := &tlsPeer{reg: newRegistry()}
		for j := range tlsBenchSeries {
			p.refs = append(p.refs, p.reg.Series(series.Labels{"metric": tlsBenchSel, "i": strconv.Itoa(j)}, series.Float))
		}
		for k := range 30 { // 30 s of history
			p.scan(now + int64(k)*1000)
		}
		srv := &api.Server{Registry: p.reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour,
			NodeName: "node" + strconv.Itoa(i), ClusterTimeout: time.Second}
		mux := http.NewServeMux()
		srv.Register(mux)
		p.srv = l.serve(b, mux, "node"+strconv.Itoa(i))
		l.peers = append(l.peers, p)
		l.members = append(l.members, hub.Member{ID: srv.NodeName, Name: srv.NodeName,
			HTTP: strings.TrimPrefix(strings.TrimPrefix(p.srv.URL, "https://"), "http://"), Up: true})
	}
	l.newHub()
	userTr := &http.Transport{MaxIdleConnsPerHost: 4}
	if secure {
		userTr.TLSClientConfig = l.me.ClientTLS()
	}
	l.client = &http.Client{Transport: userTr}
	return l
}

// serve serves h as a node named cn: plain, or TLS requiring a client certificate of the CA.
func (l *tlsLab) serve(b *testing.B, h http.Handler, cn string) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	if !l.secure {
		srv.Start()
		return srv
	}
	id, err := l.ca.NewNode(cn, net.IPv4(127, 0, 0, 1))
	if err != nil {
		b.Fatal(err)
	}
	srv.TLS = id.ServerTLS()
	srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	srv.TLS.NextProtos = []string{"http/1.1"}
	srv.StartTLS()
	return srv
}

// newHub gives node 0 a new hub (no subscription yet) and API server.
func (l *tlsLab) newHub() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		l.stop()
		l.front.Close()
	}
	cfg := hub.Config{Members: func() []hub.Member { return append([]hub.Member(nil), l.members...) },
		Interval: time.Second, Timeout: 5 * time.Second}
	if l.secure {
		cfg.TLS = l.me.ClientTLS
	}
	l.hub = hub.New(cfg)
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.hub.Run(ctx)
	srv := &api.Server{Registry: newRegistry(), Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour,
		NodeName: "node0", ClusterTimeout: time.Second, Cluster: l.hub}
	mux := http.NewServeMux()
	srv.Register(mux)
	l.front = l.serveFront(mux)
}

func (l *tlsLab) serveFront(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	if !l.secure {
		srv.Start()
		return srv
	}
	id, _ := l.ca.NewNode("node0", net.IPv4(127, 0, 0, 1))
	srv.TLS = id.ServerTLS()
	srv.TLS.NextProtos = []string{"http/1.1"}
	srv.StartTLS()
	return srv
}

// query GETs path at node 0 and checks that every peer answered ok.
func (l *tlsLab) query(b *testing.B, path string) {
	resp, err := l.client.Get(l.front.URL + path)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %v %d %s", path, err, resp.StatusCode, body)
	}
	if n := strings.Count(string(body), `"status":"ok"`); n != tlsBenchPeers+1 {
		b.Fatalf("GET %s: %d nodes ok; want %d: %.300s", path, n, tlsBenchPeers+1, body)
	}
}

// updates sets up the push path: a listener at node 0 for every peer's updates; each call of
// round makes a scan at every peer and returns once node 0 has the 4 updates.
func (l *tlsLab) updates(b *testing.B) (round, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		want int64
		got  int
		done = make(chan struct{}, 1)
		bad  atomic.Value
	)
	go l.hub.Listen(ctx, tlsBenchSel, false, func(u hub.Update) {
		if len(u.Series) != tlsBenchSeries {
			bad.CompareAndSwap(nil, fmt.Sprintf("update from %s with %d series", u.Node, len(u.Series)))
		}
		mu.Lock()
		defer mu.Unlock()
		if u.TS == want {
			if got++; got == tlsBenchPeers {
				done <- struct{}{}
			}
		}
	})
	ts := time.Now().UnixMilli()
	scan := func(wait time.Duration) bool {
		ts++
		mu.Lock()
		want, got = ts, 0
		mu.Unlock()
		for _, p := range l.peers {
			p.scan(ts)
		}
		select {
		case <-done:
			return true
		case <-time.After(wait):
			return false
		}
	}
	// Until every peer's subscription is up: rounds until one completes.
	for deadline := time.Now().Add(10 * time.Second); !scan(200 * time.Millisecond); {
		if time.Now().After(deadline) {
			b.Fatal("node 0 never received all 4 peers' updates")
		}
	}
	round = func() {
		if !scan(10 * time.Second) {
			b.Fatalf("the 4 updates of scan %d did not all arrive", ts)
		}
		if v := bad.Load(); v != nil {
			b.Fatal(v)
		}
	}
	return round, cancel
}

func (l *tlsLab) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		l.stop()
		l.front.Close()
	}
	for _, p := range l.peers {
		p.srv.Close()
	}
}
