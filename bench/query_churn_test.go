package bench

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkQueryChurn measures the agent's query path (the real /api/v1 handlers, called
// through their mux without a socket) on a node that has seen process churn beside the same
// queries on a fresh node, in one run (issue 30 item 5):
//
//	cd bench && go test -run '^$' -bench QueryChurn -benchtime 2s -count 1
//
// Both nodes hold an hour of scans every 2 s ending now with the same 2000 live series: 400
// machine series (among them 50 interfaces' net.interface.rx.bytes and one system.load_avg_1m)
// and 200 live processes' 8 series each. On the churned node the processes are short-lived
// (10 to 48 scans each, replaced as they exit), so that it also keeps about 98 k series of
// dead processes within the hour, as an agent does until their history expires; on the fresh
// node the same 200 processes live the whole hour. Each query is measured on both nodes
// (sub-benchmarks fresh/... and churned/...); "series" is the number of series in the answer.
// The targets: one series over 15 min ≤ 2 ms, a 50-series selector ≤ 20 ms.
func BenchmarkQueryChurn(b *testing.B) {
	nodes := []struct {
		name  string
		churn bool
	}{{"fresh", false}, {"churned", true}}
	for _, n := range nodes {
		node := buildQueryNode(b, n.churn)
		queries := []struct{ name, path string }{
			{"history_1series_15m", "/api/v1/history?match=system.load_avg_1m&window=15m"},
			{"history_50series_15m", "/api/v1/history?match=net.interface.rx.bytes&window=15m"},
			{"history_regexp_15m", `/api/v1/history?match={metric=~"net\\.interface\\.(rx|tx)\\.bytes",interface!="lo"}&window=15m`},
			{"history_process_page_15m", "/api/v1/history?match=" + "{pid=%22" + node.livePID + "%22}&window=15m"},
			{"history_process_rss_15m", "/api/v1/history?match=process.memory.rss&window=15m"},
			{"metrics_1series", "/api/v1/metrics?match=system.load_avg_1m"},
			{"metrics_50series", "/api/v1/metrics?match=net.interface.rx.bytes"},
			{"labels_suggest", "/api/v1/labels?q=load"},
			{"labels_suggest_full", "/api/v1/labels?q=net"},
		}
		for _, q := range queries {
			b.Run(n.name+"/"+q.name, func(b *testing.B) {
				b.ReportAllocs()
				req := httptest.NewRequest("GET", q.path, nil).WithContext(context.Background())
				w := newDiscardWriter()
				node.mux.ServeHTTP(w, req)
				if w.code != http.StatusOK {
					b.Fatalf("%s: %d %s", q.path, w.code, w.body)
				}
				got := answerSeries(b, w.body)
				for b.Loop() {
					w.reset()
					node.mux.ServeHTTP(w, req)
				}
				// (after the loop: b.Loop resets the timer, and with it reported metrics)
				b.ReportMetric(float64(got), "series")
				b.ReportMetric(float64(node.reg.View().Len()), "kept")
				b.ReportMetric(float64(node.reg.View().Live), "live")
			})
		}
	}
}

// answerSeries counts the series (or, for /api/v1/labels, the metrics and label values) of an
// answer.
func answerSeries(b *testing.B, body []byte) int {
	var a struct {
		Series  []json.RawMessage `json:"series"`
		Metrics []string          `json:"metrics"`
		Labels  []json.RawMessage `json:"labels"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		b.Fatalf("answer: %v: %.200s", err, body)
	}
	return len(a.Series) + len(a.Metrics) + len(a.Labels)
}

type queryNode struct {
	reg     *registry.Registry
	mux     *http.ServeMux
	livePID string
}

// buildQueryNode writes an hour of scans (1790 × 2 s, ending now) into a registry, as the
// agent's scanner would, and serves it with the API.
func buildQueryNode(b *testing.B, churn bool) *queryNode {
	b.Helper()
	const (
		scans    = 1790
		step     = 2000
		machine  = 400
		ifaces   = 50
		liveProc = 200
	)
	procNames := [8]string{"process.cpu.user_ms", "process.cpu.system_ms", "process.memory.rss", "process.memory.vsz", "process.memory.swap", "process.threads", "process.io.read_bytes", "process.io.write_bytes"}
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	rng := rand.New(rand.NewPCG(3, 4))

	var mrefs []*series.Ref
	for i := range ifaces {
		for _, dir := range []string{"rx", "tx"} {
			mrefs = append(mrefs, reg.Series(series.Labels{"metric": "net.interface." + dir + ".bytes", "interface": "eth" + strconv.Itoa(i)}, series.Counter))
		}
	}
	mrefs = append(mrefs, reg.Series(series.Labels{"metric": "system.load_avg_1m"}, series.Float))
	for i := len(mrefs); i < machine; i++ {
		mrefs = append(mrefs, reg.Series(series.Labels{"metric": "machine.m" + strconv.Itoa(i%40), "n": strconv.Itoa(i)}, series.Level))
	}
	type proc struct {
		refs  [8]*series.Ref
		pid   int
		death int
	}
	nextPID := 1000
	spawn := func(scan int) *proc {
		p := &proc{pid: nextPID, death: scans + 1}
		if churn {
			p.death = scan + 10 + rng.IntN(39)
		}
		nextPID++
		pid := strconv.Itoa(p.pid)
		for m, name := range procNames {
			kind := series.Level
			if m == 0 || m == 1 || m >= 6 {
				kind = series.Counter
			}
			p.refs[m] = reg.Series(series.Labels{"metric": name, "pid": pid, "process": "worker", "cgroup": "system/job" + strconv.Itoa(p.pid%20)}, kind)
		}
		return p
	}
	ps := make([]*proc, liveProc)
	for i := range ps {
		ps[i] = spawn(-rng.IntN(40))
	}
	start := time.Now().UnixMilli() - int64(scans-1)*step
	vals := make([]uint64, machine)
	for s := range scans {
		reg.Begin(start + int64(s)*step)
		for i, ref := range mrefs {
			vals[i] += uint64(rng.IntN(1000))
			reg.Put(ref, vals[i])
		}
		for i, p := range ps {
			if p.death <= s {
				p = spawn(s)
				ps[i] = p
			}
			for m, ref := range p.refs {
				reg.Put(ref, uint64(s*(m+1)+rng.IntN(10)))
			}
		}
		reg.Commit()
	}
	srv := &api.Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour,
		Status:    func(context.Context) apiwire.Status { return apiwire.Status{} },
		Processes: func(context.Context, api.ProcessQuery) apiwire.ProcessesAnswer { return apiwire.ProcessesAnswer{} }}
	mux := http.NewServeMux()
	srv.Register(mux)
	return &queryNode{reg: reg, mux: mux, livePID: strconv.Itoa(ps[0].pid)}
}

// discardWriter is an http.ResponseWriter that keeps the answer in a reused buffer.
type discardWriter struct {
	h    http.Header
	code int
	body []byte
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: http.Header{}, code: 200} }

func (w *discardWriter) Header() http.Header  { return w.h }
func (w *discardWriter) WriteHeader(code int) { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}
func (w *discardWriter) reset() { w.body, w.code = w.body[:0], 200 }
