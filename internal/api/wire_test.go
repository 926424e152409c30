package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// reencode decodes body into a T and encodes it again as the API would: with the type's own
// MarshalJSON when it has one (json.Marshal would HTML-escape its output), else json.Marshal.
func reencode[T any](t *testing.T, what string, body []byte) (T, []byte) {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: decode: %v in %s", what, err, body)
	}
	var out []byte
	var err error
	if m, ok := any(v).(json.Marshaler); ok {
		out, err = m.MarshalJSON()
	} else {
		out, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatalf("%s: encode: %v", what, err)
	}
	return v, append(out, '\n')
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		lo := max(0, i-60)
		t.Errorf("%s: re-encoded answer differs at byte %d:\n got  …%s\n want …%s", what, i,
			got[lo:min(len(got), i+60)], want[lo:min(len(want), i+60)])
	}
}

// TestWireTypesGolden: every answer of the main routes, produced by the real handlers over
// values that stress the encoding, decodes into its apiwire type (no unknown member) and
// encodes back to exactly the same bytes.
func TestWireTypesGolden(t *testing.T) {
	ts, _ := wireServer(t)
	q := url.QueryEscape
	check := func(what string, body []byte, roundTrip func(string, []byte) []byte) {
		t.Helper()
		sameBytes(t, what, roundTrip(what, body), body)
	}
	metrics := func(what string, body []byte) []byte {
		v, out := reencode[apiwire.MetricsAnswer](t, what, body)
		if len(v.Series) == 0 {
			t.Errorf("%s: no series", what)
		}
		return out
	}
	hist := func(what string, body []byte) []byte {
		v, out := reencode[apiwire.HistoryAnswer](t, what, body)
		if len(v.Series) == 0 {
			t.Errorf("%s: no series", what)
		}
		return out
	}
	stats := func(what string, body []byte) []byte {
		_, out := reencode[apiwire.StatsAnswer](t, what, body)
		return out
	}
	for _, path := range []string{"/api/v1/metrics", "/api/v1/metrics?match=" + q(`{metric=~"big|nan|phase"}`)} {
		check(path, fetchBody(t, ts, "GET", path, ""), metrics)
	}
	for _, path := range []string{"/api/v1/history?window=1m", "/api/v1/history?window=1m&fn=rate"} {
		check(path, fetchBody(t, ts, "GET", path, ""), hist)
	}
	for _, path := range []string{"/api/v1/stats?window=1m", "/api/v1/stats?window=1m&fn=rate", "/api/v1/stats?window=1m&match=none"} {
		check(path, fetchBody(t, ts, "GET", path, ""), stats)
	}
	for _, path := range []string{"/api/v1/cluster/metrics?match=" + q(`{metric=~"m&m|phase|nan"}`),
		"/api/v1/cluster/metrics?agg=sum&match=" + q(`{metric=~"m&m|small"}`) + "&fn=rate",
		"/api/v1/cluster/metrics?agg=avg&by=metric"} {
		check(path, fetchBody(t, ts, "GET", path, ""), func(what string, body []byte) []byte {
			v, out := reencode[apiwire.ClusterMetricsAnswer](t, what, body)
			if len(v.Nodes) != 4 {
				t.Errorf("%s: %d nodes; want local and 3 peers", what, len(v.Nodes))
			}
			return out
		})
	}
	// Every node's history is written as HistorySeries writes it (the local node's, the peers'
	// kept history, and a peer's fetched for a window longer than kept, decoded into
	// apiwire.HistoryAnswer and encoded once): bytes checked where the local node has no
	// series, the JSON value everywhere.
	clusterHistory := func(what string, body []byte) []byte {
		_, out := reencode[apiwire.ClusterHistoryAnswer](t, what, body)
		return out
	}
	path := "/api/v1/cluster/history?window=1m&match=" + q(`m&m`)
	check(path, fetchBody(t, ts, "GET", path, ""), clusterHistory)
	path = "/api/v1/cluster/history?window=1m&match=" + q(`{metric=~"m&m|small|nan"}`)
	body := fetchBody(t, ts, "GET", path, "")
	if got, want := jsonValue(t, clusterHistory(path, body)), jsonValue(t, body); got != want {
		t.Errorf("%s: re-encoded answer is another JSON value:\n got  %s\n want %s", path, got, want)
	}
	check("/api/v1/alerts", fetchBody(t, ts, "GET", "/api/v1/alerts", ""), func(what string, body []byte) []byte {
		_, out := reencode[apiwire.AlertsAnswer](t, what, body)
		return out
	})
	check("/api/v1/peers", fetchBody(t, ts, "GET", "/api/v1/peers", ""), func(what string, body []byte) []byte {
		_, out := reencode[apiwire.PeersAnswer](t, what, body)
		return out
	})
	check("POST /api/v1/peers", fetchBody(t, ts, "POST", "/api/v1/peers", `{"addr":"h<1>:1"}`), func(what string, body []byte) []byte {
		_, out := reencode[apiwire.AddPeerAnswer](t, what, body)
		return out
	})
	for _, path := range []string{"/api/v1/metrics?match=" + q(`{<&`), "/api/v1/nope<&>"} {
		check(path, fetchBody(t, ts, "GET", path, ""), func(what string, body []byte) []byte {
			v, out := reencode[apiwire.ErrorAnswer](t, what, body)
			if v.Error == "" {
				t.Errorf("%s: no error message", what)
			}
			return out
		})
	}
}

// TestWireTypesValues: the decoded values are the ones the registry holds: a counter above
// 2^53 exactly (its literal), NaN and ±Inf from their strings, a state's text "NaN" as text.
func TestWireTypesValues(t *testing.T) {
	ts, _ := wireServer(t)
	var ans apiwire.MetricsAnswer
	if err := json.Unmarshal(fetchBody(t, ts, "GET", "/api/v1/metrics", ""), &ans); err != nil {
		t.Fatal(err)
	}
	got := map[string]apiwire.Series{}
	for _, s := range ans.Series {
		got[s.Labels["metric"]] = s
	}
	if s := got["big"]; !s.Value.IsInt() || s.Value.Raw != "1152921504615846985" || !s.Rate.Valid {
		t.Errorf("big = %+v; want the exact literal 2^60+9000009 and a rate", s)
	}
	if s := got["nan"]; !s.Value.Valid || !math.IsNaN(s.Value.F) {
		t.Errorf("nan = %+v; want NaN", s.Value)
	}
	if s := got["inf"]; !math.IsInf(s.Value.F, 1) || !math.IsInf(got["ninf"].Value.F, -1) {
		t.Errorf("inf, ninf = %+v, %+v; want +Inf, -Inf", s.Value, got["ninf"].Value)
	}
	if s := got["phase"]; s.Kind != "state" || s.Text != "NaN" || s.Value.Valid || s.Since == 0 {
		t.Errorf("phase = %+v; want state text NaN with its since", s)
	}
	if s := got["lvl"]; s.Value.F != -27 || s.Rate.Valid {
		t.Errorf("lvl = %+v; want -27 without a rate", s)
	}
}

// jsonValue returns b's JSON value in a canonical form (maps sorted, numbers as written).
func jsonValue(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestAlertsNonFinite: an alert whose value is NaN or infinite is answered (the strings
// apiwire.Number decodes), not refused as encoding/json refuses such a float.
func TestAlertsNonFinite(t *testing.T) {
	snap := &alerts.Snapshot{Alerts: []alerts.Alert{
		{Name: "inf", State: "firing", Labels: series.Labels{}, Value: math.Inf(1), Op: ">", Threshold: 1},
		{Name: "nan", State: "pending", Labels: series.Labels{}, Value: math.NaN(), Op: "!=", Threshold: math.Inf(-1)},
	}}
	ts := alertsServer(t, "n1", snap, nil)
	body := fetchBody(t, ts, "GET", "/api/v1/alerts", "")
	var ans apiwire.AlertsAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if len(ans.Alerts) != 2 || !math.IsInf(float64(ans.Alerts[0].Value), 1) || !math.IsNaN(float64(ans.Alerts[1].Value)) ||
		!math.IsInf(float64(ans.Alerts[1].Threshold), -1) {
		t.Errorf("alerts = %s; want +Inf, then NaN with threshold -Inf", body)
	}
}

// BenchmarkMetricsWire: a /api/v1/metrics answer of 1000 counters (with rates), encoded by the
// handler's appender (LatestJSON, what the agent serves) and by apiwire.MetricsAnswer from the
// decoded answer, side by side; and decoded into apiwire.MetricsAnswer (what the CLI does) and
// into map[string]any (a client without types).
//
//	go test -run '^$' -bench MetricsWire ./internal/api/
func BenchmarkMetricsWire(b *testing.B) {
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	var refs []*series.Ref
	for i := range 1000 {
		refs = append(refs, reg.Series(series.Labels{"metric": "app.requests", "pid": strconv.Itoa(1000 + i), "process": "web"}, series.Counter))
	}
	now := time.Now().UnixMilli()
	for s := range int64(3) {
		reg.Begin(now - 4000 + s*2000)
		for i, r := range refs {
			reg.Put(r, uint64(int64(i)*s*7))
		}
		reg.Commit()
	}
	sel, err := selector.Parse("")
	if err != nil {
		b.Fatal(err)
	}
	q := Query{Sel: sel}
	body := LatestJSON(nil, reg, q)
	var ans apiwire.MetricsAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		b.Fatal(err)
	}
	runCPU(b, "encode/LatestJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		buf := make([]byte, 0, len(body)+64)
		for range b.N {
			buf = LatestJSON(buf[:0], reg, q)
		}
	})
	runCPU(b, "encode/apiwire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			if _, err := ans.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	runCPU(b, "decode/apiwire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			var a apiwire.MetricsAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
	runCPU(b, "decode/cli-before", func(b *testing.B) {
		// The CLI's own struct before apiwire (value kept raw, decoded per row).
		type seriesJSON struct {
			Labels map[string]string `json:"labels"`
			Kind   string            `json:"kind"`
			Value  json.RawMessage   `json:"value"`
			TS     int64             `json:"ts"`
			Rate   apiwire.Number    `json:"rate"`
			Text   *string           `json:"text"`
			Since  int64             `json:"since"`
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			var a struct {
				Series []seriesJSON `json:"series"`
			}
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
			for _, s := range a.Series {
				var n apiwire.Number
				if err := json.Unmarshal(s.Value, &n); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	runCPU(b, "decode/map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			var a map[string]any
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// runCPU is b.Run that also reports the process's CPU time per op (rusage: user + system),
// which a busy machine disturbs less than the wall time.
func runCPU(b *testing.B, name string, f func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		f(b)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	})
}
