package promapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

const t0 = 1_700_000_000_000

// newHandler serves 30 scans 2 s apart of two per-CPU counters and the load.
func newHandler(t testing.TB, opt Options) *Handler {
	t.Helper()
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	cpu0 := reg.Series(series.Labels{"metric": "cpu.user_ms", "cpu": "0"}, series.Counter)
	cpu1 := reg.Series(series.Labels{"metric": "cpu.user_ms", "cpu": "1"}, series.Counter)
	load := reg.Series(series.Labels{"metric": "system.load_avg_1min"}, series.Float)
	for i := range 30 {
		reg.Begin(t0 + int64(i)*2000)
		reg.Put(cpu0, uint64(i)*1000)
		reg.Put(cpu1, uint64(i)*500)
		reg.Put(load, math.Float64bits(float64(i)/10))
		reg.Commit()
	}
	st := promstore.New(hist, promstore.RegistryCatalog(reg), promstore.Options{Instance: "n1:22682", Node: "n1"})
	if opt.Now == nil {
		opt.Now = func() time.Time { return time.UnixMilli(t0 + 29*2000) }
	}
	return New(st, opt)
}

type answer struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
}

func get(t testing.TB, h http.Handler, method, path string, form url.Values) (int, answer) {
	t.Helper()
	var r *http.Request
	if method == http.MethodPost {
		r = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, path+"?"+form.Encode(), nil)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var a answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("%s %s: not JSON: %q", method, path, w.Body.String())
	}
	if w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, w.Header().Get("Content-Type"))
	}
	return w.Code, a
}

// TestQueryAnswersAsPrometheus: instant and range queries, by GET and by a POSTed form,
// answer in Prometheus's shapes.
func TestQueryAnswersAsPrometheus(t *testing.T) {
	h := newHandler(t, Options{})
	end := float64(t0+29*2000) / 1000
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		code, a := get(t, h, m, Prefix+"query", url.Values{"query": {`sum(rate(node_cpu_seconds_total[20s]))`}, "time": {strconvF(end)}})
		if code != 200 || a.Status != "success" {
			t.Fatalf("%s query: %d %+v", m, code, a)
		}
		var d struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		if err := json.Unmarshal(a.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.ResultType != "vector" || len(d.Result) != 1 || d.Result[0].Value[1] != "0.75" || d.Result[0].Value[0].(float64) != end {
			t.Fatalf("%s query: %s", m, a.Data)
		}
	}
	code, a := get(t, h, http.MethodGet, Prefix+"query_range", url.Values{"query": {`node_load1`},
		"start": {strconvF(end - 10)}, "end": {strconvF(end)}, "step": {"2"}})
	var m struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.Data, &m); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	if m.ResultType != "matrix" || len(m.Result) != 1 || len(m.Result[0].Values) != 6 || m.Result[0].Values[5][1] != "2.9" ||
		m.Result[0].Metric["node"] != "n1" || m.Result[0].Metric["__name__"] != "node_load1" {
		t.Fatalf("query_range: %s", a.Data)
	}
	// An empty answer is [] (Grafana reads result as an array), never null.
	_, a = get(t, h, http.MethodGet, Prefix+"query", url.Values{"query": {`nothing_here`}})
	if !strings.Contains(string(a.Data), `"result":[]`) {
		t.Fatalf("empty result: %s", a.Data)
	}
}

func strconvF(f float64) string { return strings.TrimRight(strings.TrimRight(fmtF(f), "0"), ".") }

func fmtF(f float64) string { b, _ := json.Marshal(f); return string(b) }

// TestErrorsAsPrometheus: bad input and limits get Prometheus's error types and codes.
func TestErrorsAsPrometheus(t *testing.T) {
	h := newHandler(t, Options{MaxSamples: 10})
	end := float64(t0+29*2000) / 1000
	for _, c := range []struct {
		path string
		form url.Values
		code int
		typ  string
		msg  string
	}{
		{"query", url.Values{"query": {`sum(`}}, 400, "bad_data", "invalid parameter \"query\""},
		{"query", url.Values{"query": {`up`}, "time": {"yesterday"}}, 400, "bad_data", "invalid parameter \"time\""},
		{"query_range", url.Values{"query": {`up`}, "start": {"10"}, "end": {"20"}, "step": {"0"}}, 400, "bad_data", "zero or negative query resolution step"},
		{"query_range", url.Values{"query": {`up`}, "start": {"20"}, "end": {"10"}, "step": {"1"}}, 400, "bad_data", "end timestamp must not be before start time"},
		{"query_range", url.Values{"query": {`up`}, "start": {"0"}, "end": {"100000"}, "step": {"1"}}, 400, "bad_data", "exceeded maximum resolution of 11,000 points"},
		{"query", url.Values{"query": {`node_cpu_seconds_total[1m]`}, "time": {strconvF(end)}}, 422, "execution", "query processing would load too many samples into memory"},
		{"series", url.Values{}, 400, "bad_data", "no match[] parameter provided"},
		{"series", url.Values{"match[]": {`{foo=""}`}}, 400, "bad_data", "match[] must contain at least one non-empty matcher"},
		{"labels", url.Values{"match[]": {`{`}}, 400, "bad_data", "invalid parameter \"match[]\""},
		{"label/%FF/values", url.Values{}, 400, "bad_data", "invalid label name"},
		{"nothing", url.Values{}, 404, "not_found", "not found"},
	} {
		code, a := get(t, h, http.MethodGet, Prefix+c.path, c.form)
		if code != c.code || a.Status != "error" || a.ErrorType != c.typ || !strings.Contains(a.Error, c.msg) {
			t.Errorf("%s %v: %d %+v, want %d %s %q", c.path, c.form, code, a, c.code, c.typ, c.msg)
		}
	}
}

// TestQueryTimeout: a query past --query-timeout is refused with Prometheus's timeout error.
func TestQueryTimeout(t *testing.T) {
	h := newHandler(t, Options{Timeout: time.Nanosecond})
	code, a := get(t, h, http.MethodGet, Prefix+"query", url.Values{"query": {`sum(rate(node_cpu_seconds_total[1m]))`}})
	if code != http.StatusServiceUnavailable || a.ErrorType != "timeout" {
		t.Fatalf("%d %+v, want 503 timeout", code, a)
	}
}

// TestMetadataLabelsSeries: the discovery endpoints Grafana reads.
func TestMetadataLabelsSeries(t *testing.T) {
	h := newHandler(t, Options{})
	_, a := get(t, h, http.MethodGet, Prefix+"labels", nil)
	if string(a.Data) != `["__name__","cpu","instance","mode","node"]` {
		t.Errorf("labels: %s", a.Data)
	}
	_, a = get(t, h, http.MethodGet, Prefix+"label/__name__/values", nil)
	if string(a.Data) != `["node_cpu_seconds_total","node_load1"]` {
		t.Errorf("names: %s", a.Data)
	}
	_, a = get(t, h, http.MethodGet, Prefix+"label/cpu/values", url.Values{"match[]": {`node_cpu_seconds_total`}})
	if string(a.Data) != `["0","1"]` {
		t.Errorf("cpu values: %s", a.Data)
	}
	_, a = get(t, h, http.MethodPost, Prefix+"series", url.Values{"match[]": {`node_load1`, `{cpu="1"}`}})
	if string(a.Data) != `[{"__name__":"node_cpu_seconds_total","cpu":"1","instance":"n1:22682","mode":"user","node":"n1"},{"__name__":"node_load1","instance":"n1:22682","node":"n1"}]` {
		t.Errorf("series: %s", a.Data)
	}
	_, a = get(t, h, http.MethodGet, Prefix+"metadata", url.Values{"metric": {"node_cpu_seconds_total"}})
	var md map[string][]metadataEntry
	if err := json.Unmarshal(a.Data, &md); err != nil || len(md) != 1 || md["node_cpu_seconds_total"][0].Type != "counter" || md["node_cpu_seconds_total"][0].Help == "" {
		t.Errorf("metadata: %s", a.Data)
	}
	_, a = get(t, h, http.MethodGet, Prefix+"status/buildinfo", nil)
	if !strings.Contains(string(a.Data), `"goVersion":"go`) {
		t.Errorf("buildinfo: %s", a.Data)
	}
}

// FuzzQuery: whatever the query and its parameters, the answer is Prometheus's JSON, a
// success or an error with a type, never a panic or a 500.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{`up`, `sum(rate(node_cpu_seconds_total[1m])) by (cpu)`, `{__name__=~"(a+)+"}`, `node_load1 offset -1h`,
		`topk(2, node_load1) @ end()`, `x[5m:1s]`, `label_replace(up, "a", "$1", "b", "(.*")`, `1/0`, `"str"`} {
		f.Add(s, "1700000050", "2", "end")
	}
	h := newHandler(f, Options{MaxSamples: 100000, Timeout: 2 * time.Second})
	f.Fuzz(func(t *testing.T, q, ts, step, which string) {
		path, form := "query", url.Values{"query": {q}, "time": {ts}}
		if which == "range" {
			path, form = "query_range", url.Values{"query": {q}, "start": {ts}, "end": {"1700000058"}, "step": {step}}
		}
		code, a := get(t, h, http.MethodGet, Prefix+path, form)
		switch {
		case code == 200 && a.Status == "success":
		case code != 200 && code != 500 && a.Status == "error" && a.ErrorType != "":
		default:
			t.Fatalf("%q: %d %+v", q, code, a)
		}
	})
}

// TestShareTakesTheSameSlots: a Handler made with Share (the cluster API beside the node's)
// takes its queries from the same --query-max-concurrency slots: with the one slot held, its
// query waits and, its timeout over, is refused.
func TestShareTakesTheSameSlots(t *testing.T) {
	node := newHandler(t, Options{MaxConcurrency: 1})
	other := New(node.st, Options{Prefix: ClusterPrefix, Share: node})
	node.slots <- struct{}{}
	code, a := get(t, other, http.MethodGet, ClusterPrefix+"query", url.Values{"query": {`node_load1`}, "timeout": {"200ms"}})
	if code != http.StatusServiceUnavailable || a.ErrorType != "timeout" || !strings.Contains(a.Error, "--query-max-concurrency") {
		t.Fatalf("with the node's slot held: %d %+v", code, a)
	}
	<-node.slots
	if code, a := get(t, other, http.MethodGet, ClusterPrefix+"query", url.Values{"query": {`node_load1`}}); code != 200 {
		t.Fatalf("with the slot free: %d %+v", code, a)
	}
}

// TestConcurrentQueriesKeepTheirValues: queries answered at once each get their own values:
// a result is written before its query gives its points back to the engine's pools (run with
// -race, which also reports the reuse itself).
func TestConcurrentQueriesKeepTheirValues(t *testing.T) {
	h := newHandler(t, Options{})
	form := func(scale string) url.Values {
		return url.Values{"query": {`node_load1 * ` + scale}, "start": {fmt.Sprint(t0 / 1000)},
			"end": {fmt.Sprint((t0 + 29*2000) / 1000)}, "step": {"2"}}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 8 {
		scale := []string{"1", "1000"}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				code, a := get(t, h, http.MethodGet, Prefix+"query_range", form(scale))
				var d struct {
					Result []struct {
						Values [][2]any `json:"values"`
					} `json:"result"`
				}
				if code != 200 || json.Unmarshal(a.Data, &d) != nil || len(d.Result) != 1 {
					errs <- fmt.Sprintf("scale %s: %d %s %s", scale, code, a.Data, a.Error)
					return
				}
				for i, v := range d.Result[0].Values {
					want := float64(i) / 10 * map[string]float64{"1": 1, "1000": 1000}[scale]
					if got, _ := v[1].(string); !closeTo(got, want) {
						errs <- fmt.Sprintf("scale %s: point %d = %s, want %v", scale, i, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func closeTo(a string, y float64) bool {
	x, err := strconv.ParseFloat(a, 64)
	return err == nil && math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y))
}
