package promcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/storage"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/promapi"
)

// benchScans is an hour of 2 s scans: what every node of the benchmarks holds.
const benchScans = 1800

// benchNow is the benchmarks' now: the last scan.
var benchNow = time.UnixMilli(t0 + (benchScans-1)*2000)

// benchQueries are the benchmarks' queries: an instant one, a query_range of node_load1
// over the last 5 minutes at a 2 s step, and the instant one's over the hour at a 2 s step
// (issue 34's: a Grafana panel of the fleet's CPU by node), and that summed over the nodes (an
// answer of one series, whatever the nodes).
func benchQueries() map[string]url.Values {
	at := fmt.Sprint(float64(benchNow.UnixMilli()) / 1000)
	return map[string]url.Values{
		"instant":     {"query": {`sum by (node)(rate(node_cpu_seconds_total[1m]))`}, "time": {at}},
		"range5m":     {"query": {`node_load1`}, "start": {fmt.Sprint(float64(benchNow.UnixMilli()-300_000) / 1000)}, "end": {at}, "step": {"2"}},
		"range1h":     {"query": {`sum by (node)(rate(node_cpu_seconds_total[1m]))`}, "start": {fmt.Sprint(float64(benchNow.UnixMilli()-3600_000+2000) / 1000)}, "end": {at}, "step": {"2"}},
		"range1h-sum": {"query": {`sum(rate(node_cpu_seconds_total[1m]))`}, "start": {fmt.Sprint(float64(benchNow.UnixMilli()-3600_000+2000) / 1000)}, "end": {at}, "step": {"2"}},
	}
}

// benchSeries is how many series the answer of query qname over nodes nodes has.
func benchSeries(qname string, nodes int) int {
	if strings.HasSuffix(qname, "-sum") {
		return 1
	}
	return nodes
}

// benchQueryNames are benchQueries' names, in the order the benchmarks run them.
var benchQueryNames = []string{"instant", "range5m", "range1h", "range1h-sum"}

// benchPeer is a fake peer's handler: its node-local API, and its peer select unless old.
func benchPeer(name string, i int, old bool) http.Handler {
	st := newNode(name, float64(i), benchScans, 4)
	mux := http.NewServeMux()
	mux.Handle(promapi.Prefix, promapi.New(st, promapi.Options{Now: func() time.Time { return benchNow }}))
	if !old {
		mux.Handle(apiwire.PeerSelectPath, PeerHandler(st, PeerOptions{}))
	}
	return mux
}

// precomputed answers each request with the bytes h answered the first time it was asked
// the same path and parameters: a peer whose own work is only sending its answer.
func precomputed(h http.Handler) http.Handler {
	var mu sync.Mutex
	cache := map[string]*httptest.ResponseRecorder{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rec, ok := cache[r.URL.RequestURI()]
		mu.Unlock()
		if !ok {
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			mu.Lock()
			cache[r.URL.RequestURI()] = rec
			mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runQueries times the queries of h over nodes nodes, reporting the process's CPU per query
// (cpu-ms/op) beside the wall time.
func runQueries(b *testing.B, h http.Handler, qname string, nodes int) {
	path := "query"
	if strings.HasPrefix(qname, "range") {
		path = "query_range"
	}
	params := benchQueries()[qname]
	nodes = benchSeries(qname, nodes)
	code, a, body := get(b, h, path, params) // connections made, caches filled
	if code != 200 || len(a.Data.Result) != nodes || len(a.Warnings) > 0 {
		b.Fatalf("%d %d series: %.300s", code, len(a.Data.Result), body)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		// The answer is checked by its bytes (its series counted, no warnings), not decoded:
		// decoding a client's copy is not the asking node's work.
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", promapi.ClusterPrefix+path+"?"+params.Encode(), nil))
		body := rec.Body.Bytes()
		if rec.Code != 200 || bytes.Count(body, []byte(`{"metric":`)) != nodes || bytes.Contains(body, []byte(`"warnings"`)) {
			b.Fatalf("%d: %.300s", rec.Code, body)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkClusterQuery is an instant query, sum by (node)(rate(node_cpu_seconds_total[1m])),
// and a query_range of node_load1 over the last 5 minutes at a 2 s step, each node holding an
// hour of 2 s scans of its load and 4 CPUs: node-local (nodes=1) and over the local node and
// 20 peers (nodes=21), fetched (the peer select) and pushed down (nodes=21/pushdown, Plan:
// the peers evaluate the sums). The peers are in-process fakes: each a real promapi.Handler
// and PeerHandler over its own promstore, served by httptest over loopback, asked through a
// kept-alive hub.Fetcher as the agent does; all of it, the 20 peers' work included, is in the
// figures (time and this process's CPU).
func BenchmarkClusterQuery(b *testing.B) {
	local := node(b, "local", 1, benchScans, 4)
	var members []hub.Member
	for i := range 20 {
		name := fmt.Sprintf("peer%02d", i)
		srv := httptest.NewServer(benchPeer(name, i, false))
		b.Cleanup(srv.Close)
		members = append(members, hub.Member{ID: name, Name: name, HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true})
	}
	for _, qname := range benchQueryNames {
		for _, nodes := range []int{1, 21, -21} {
			name := fmt.Sprintf("%s/nodes=%d", qname, nodes)
			if nodes < 0 {
				nodes = -nodes
				name = fmt.Sprintf("%s/nodes=%d/pushdown", qname, nodes)
			}
			b.Run(name, func(b *testing.B) {
				ms := members[:nodes-1]
				f := &hub.Fetcher{Timeout: time.Second, KeepAlive: true}
				b.Cleanup(f.CloseIdle)
				q := New(local, Options{Node: "local", Members: func() []hub.Member { return ms }, Fetch: f})
				opt := promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Now: func() time.Time { return benchNow }}
				if strings.HasSuffix(name, "pushdown") {
					opt.Planner = q
				}
				runQueries(b, promapi.New(local, opt), qname, nodes)
			})
		}
	}
}

// peersEnv names the benchmark's peer process: its value is "old" for peers without the
// peer select, "new" for peers with it.
const peersEnv = "PROMCLUSTER_BENCH_PEERS"

// TestMain runs the benchmark's peer process when peersEnv says so (see servePeers), the
// tests otherwise.
func TestMain(m *testing.M) {
	if v := os.Getenv(peersEnv); v != "" {
		servePeers(v == "old")
		return
	}
	os.Exit(m.Run())
}

// servePeers serves 20 live fake peers and 20 precomputed ones on loopback, writes their
// addresses to stdout, one a line (live first), and serves until stdin closes.
func servePeers(old bool) {
	var addrs []string
	var live []http.Handler
	for i := range 20 {
		live = append(live, benchPeer(fmt.Sprintf("peer%02d", i), i, old))
	}
	for _, pre := range []bool{false, true} {
		for _, h := range live {
			if pre {
				h = precomputed(h)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			go http.Serve(ln, h)
			addrs = append(addrs, ln.Addr().String())
		}
	}
	fmt.Println(strings.Join(addrs, "\n"))
	io.Copy(io.Discard, os.Stdin)
}

// startPeers starts the peer process and returns the live and the precomputed peers.
func startPeers(b *testing.B, old bool) (live, pre []hub.Member) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%v", peersEnv, map[bool]string{true: "old", false: "new"}[old]))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for i := 0; i < 40 && sc.Scan(); i++ {
		name := fmt.Sprintf("peer%02d", i%20)
		m := hub.Member{ID: name, Name: name, HTTP: sc.Text(), Up: true}
		if i < 20 {
			live = append(live, m)
		} else {
			pre = append(pre, m)
		}
	}
	if len(pre) != 20 {
		b.Fatalf("peer process: %d addresses, %v", len(live)+len(pre), sc.Err())
	}
	return live, pre
}

// BenchmarkClusterQueryAskingNode is BenchmarkClusterQuery's queries with the 20 peers in
// another process, so that this process's CPU (cpu-ms/op) is the asking node's alone: its
// requests, reading the answers, the engine. peers=live are real promapi and peer select
// handlers computing every answer (their CPU is the other process's, but they share the
// machine's cores, so the wall time still carries their work); peers=precomputed answer each
// request with the bytes they answered it the first time, so the wall time is nearly the
// asking node's own. wire=peer-select is the agent's way (one request per peer and query,
// XOR chunks, one kept-alive connection per peer); wire=json-per-selector is the way before
// it (peers without the peer select, asked a JSON range query per selector over a new
// connection per request); wire=pushdown is the agent's way with Plan (the peers evaluate the
// sums by node, their query_range answers over a kept-alive connection). nodes=1 is the node-local query; nodes=21/peers=in-memory the same
// query over the same 21 nodes' series held in this process (one merged storage): the
// engine's own work over that many series, with no peer to ask. The ratios to both are the
// cluster query's cost.
func BenchmarkClusterQueryAskingNode(b *testing.B) {
	local := node(b, "local", 1, benchScans, 4)
	peers := map[string]map[string][]hub.Member{}
	for _, wire := range []string{"peer-select", "json-per-selector"} {
		live, pre := startPeers(b, wire != "peer-select")
		peers[wire] = map[string][]hub.Member{"live": live, "precomputed": pre}
	}
	// The 21 nodes' series in this process, queried through one merged storage: the engine's
	// own work over the same series as the cluster query, without peers.
	stores := []storage.Queryable{local}
	for i := range 20 {
		stores = append(stores, newNode(fmt.Sprintf("peer%02d", i), float64(i), benchScans, 4))
	}
	merged := storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		qs := make([]storage.Querier, len(stores))
		for i, st := range stores {
			var err error
			if qs[i], err = st.Querier(mint, maxt); err != nil {
				return nil, err
			}
		}
		return storage.NewMergeQuerier(qs, nil, storage.ChainedSeriesMerge), nil
	})
	for _, qname := range benchQueryNames {
		b.Run(fmt.Sprintf("%s/nodes=1", qname), func(b *testing.B) {
			h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Now: func() time.Time { return benchNow }})
			runQueries(b, h, qname, 1)
		})
		b.Run(fmt.Sprintf("%s/nodes=21/peers=in-memory", qname), func(b *testing.B) {
			h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: merged, Now: func() time.Time { return benchNow }})
			runQueries(b, h, qname, 21)
		})
		for _, kind := range []string{"live", "precomputed"} {
			for _, wire := range []string{"peer-select", "json-per-selector", "pushdown"} {
				ms := peers[wire][kind]
				if wire == "pushdown" {
					ms = peers["peer-select"][kind]
				}
				b.Run(fmt.Sprintf("%s/nodes=21/peers=%s/wire=%s", qname, kind, wire), func(b *testing.B) {
					f := &hub.Fetcher{Timeout: time.Second, KeepAlive: wire != "json-per-selector"}
					b.Cleanup(f.CloseIdle)
					q := New(local, Options{Node: "local", Members: func() []hub.Member { return ms }, Fetch: f})
					opt := promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Now: func() time.Time { return benchNow }}
					if wire == "pushdown" {
						opt.Planner = q
					}
					runQueries(b, promapi.New(local, opt), qname, 21)
				})
			}
		}
	}
}

// BenchmarkPeerValuesDecode is the decoding of a peer's values arrays, 100 series of 1800
// points (an hour at 2 s), by parseValues and by encoding/json (the path parseValues spares).
func BenchmarkPeerValuesDecode(b *testing.B) {
	var one strings.Builder
	one.WriteByte('[')
	for i := range 1800 {
		if i > 0 {
			one.WriteByte(',')
		}
		fmt.Fprintf(&one, `[%.3f,"%g"]`, float64(t0+int64(i)*2000)/1000, float64(i)*1.37)
	}
	one.WriteByte(']')
	arr := []byte(one.String())
	b.Run("parseValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for range 100 {
				if _, ok := parseValues(arr); !ok {
					b.Fatal("not read")
				}
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for range 100 {
				var vals []wirePoint
				if err := json.Unmarshal(arr, &vals); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
