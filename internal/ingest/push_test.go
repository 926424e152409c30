package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// clock is a settable time source for tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestPush(cfg Config) (*Push, *clock) {
	c := &clock{time.Unix(1700000000, 0)}
	cfg.Now = c.now
	return New(cfg), c
}

func post(t *testing.T, h http.Handler, query string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/write"+query, bytes.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func collect(t *testing.T, p *Push) *series.Recorder {
	t.Helper()
	rec := series.NewRecorder()
	if err := p.Collect(context.Background(), rec); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return rec
}

func key(l series.Labels) string { return l.Key() }

// pl returns l with the label every pushed series carries.
func pl(l series.Labels) series.Labels {
	l[SourceLabel] = SourceValue
	return l
}

func TestWriteHandlerStoresAndCollects(t *testing.T) {
	p, clk := newTestPush(Config{Expire: time.Minute})
	h := p.WriteHandler()
	w := post(t, h, "?db=telegraf&precision=s", []byte("cpu,host=a usage=1.5,n=3i,c=7u,up=true,st=\"ok\" 1700000000\n"), nil)
	if w.Code != http.StatusNoContent {
		t.Fatalf("POST /write = %d %s; want 204", w.Code, w.Body)
	}
	rec := collect(t, p)
	for _, tc := range []struct {
		metric string
		kind   series.Kind
		bits   uint64
	}{
		{"cpu.usage", series.Float, math.Float64bits(1.5)},
		{"cpu.n", series.Level, 3},
		{"cpu.c", series.Counter, 7},
		{"cpu.up", series.Level, 1},
	} {
		k := key(pl(series.Labels{"metric": tc.metric, "host": "a"}))
		ref := rec.Refs()[k]
		if ref == nil || ref.Kind != tc.kind || rec.Values[k] != tc.bits {
			t.Errorf("series %s: ref %+v value %d; want kind %v value %d", k, ref, rec.Values[k], tc.kind, tc.bits)
		}
	}
	st := rec.States[key(pl(series.Labels{"metric": "cpu.st", "host": "a"}))]
	if st.Text != "ok" || st.Since != 1700000000000 {
		t.Errorf("state = %+v; want ok since 1700000000000", st)
	}
	if v := rec.Values[key(series.Labels{"metric": "ingest.write.lines"})]; v != 1 {
		t.Errorf("ingest.write.lines = %d; want 1", v)
	}
	// A point is stored once: a scan with nothing new stores nothing.
	rec = collect(t, p)
	if v, ok := rec.Values[key(pl(series.Labels{"metric": "cpu.usage", "host": "a"}))]; ok {
		t.Errorf("usage stored again by a scan with nothing new: %v", math.Float64frombits(v))
	}
	// An older point is stored at its own time (a plain Sink just takes it; the registry
	// places it on its scan or refuses it, see TestWriteKeepsPointsAsSent); the state keeps its
	// since.
	post(t, h, "?precision=s", []byte("cpu,host=a usage=9 1699999999\ncpu,host=a st=\"ok\" 1700000100"), nil)
	rec = collect(t, p)
	if v := math.Float64frombits(rec.Values[key(pl(series.Labels{"metric": "cpu.usage", "host": "a"}))]); v != 9 {
		t.Errorf("usage after an older line = %v; want 9", v)
	}
	if st := rec.States[key(pl(series.Labels{"metric": "cpu.st", "host": "a"}))]; st.Since != 1700000000000 {
		t.Errorf("state since after the same text = %d; want unchanged", st.Since)
	}
	// Expiry.
	clk.t = clk.t.Add(2 * time.Minute)
	rec = collect(t, p)
	if _, ok := rec.Values[key(pl(series.Labels{"metric": "cpu.usage", "host": "a"}))]; ok {
		t.Error("series not expired after Expire")
	}
	if s := p.Stats(); s.Series != 0 || s.Expired != 5 {
		t.Errorf("Stats after expiry = %+v; want 0 series, 5 expired", s)
	}
}

func TestWriteHandlerPartialWrite(t *testing.T) {
	p, _ := newTestPush(Config{})
	body := "ok1 v=1\nbroken v=\nok2 v=2\nok1 v=\"now a string\"\nalso bad\nok3 v=3\n"
	w := post(t, p.WriteHandler(), "", []byte(body), nil)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("POST = %d; want 400", w.Code)
	}
	var ans struct {
		Error string `json:"error"`
		Lines []int  `json:"lines"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
		t.Fatalf("answer %q: %v", w.Body, err)
	}
	if !equalInts(ans.Lines, []int{2, 4, 5}) {
		t.Errorf("lines = %v; want [2 4 5]", ans.Lines)
	}
	for _, s := range []string{"partial write", "line 2: unable to parse 'broken v='", "line 4", "field type conflict", "line 5", "dropped=3"} {
		if !strings.Contains(ans.Error, s) {
			t.Errorf("error %q lacks %q", ans.Error, s)
		}
	}
	rec := collect(t, p)
	for _, m := range []string{"ok1.v", "ok2.v", "ok3.v"} {
		if _, ok := rec.Values[key(pl(series.Labels{"metric": m}))]; !ok {
			t.Errorf("valid line %s not stored", m)
		}
	}
	if s := p.Stats(); s.WriteLines != 3 || s.WriteRejected != 3 {
		t.Errorf("Stats = %+v; want 3 lines, 3 rejected", s)
	}
	// v2 errors.
	w = post(t, p.WriteHandlerV2(), "?org=o&bucket=b&precision=us", []byte("x v=\n"), nil)
	var v2 struct{ Code, Message string }
	if w.Code != 400 || json.Unmarshal(w.Body.Bytes(), &v2) != nil || v2.Code != "invalid" || !strings.Contains(v2.Message, "line 1") {
		t.Errorf("v2 answer = %d %s", w.Code, w.Body)
	}
}

func TestWriteHandlerGzipAndLimits(t *testing.T) {
	p, _ := newTestPush(Config{MaxBodyBytes: 1000, MaxSeries: 4})
	h := p.WriteHandler()
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte("z,t=1 v=1\nz,t=2 v=2\n"))
	zw.Close()
	if w := post(t, h, "", zb.Bytes(), map[string]string{"Content-Encoding": "gzip"}); w.Code != 204 {
		t.Errorf("gzip POST = %d %s; want 204", w.Code, w.Body)
	}
	if w := post(t, h, "", []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"}); w.Code != 400 {
		t.Errorf("bad gzip POST = %d; want 400", w.Code)
	}
	if w := post(t, h, "", []byte("a v=1"), map[string]string{"Content-Encoding": "br"}); w.Code != 415 {
		t.Errorf("br POST = %d; want 415", w.Code)
	}
	big := bytes.Repeat([]byte("big v=1\n"), 200)
	if w := post(t, h, "", big, nil); w.Code != 413 || !strings.Contains(w.Body.String(), "too large") {
		t.Errorf("big POST = %d %s; want 413", w.Code, w.Body)
	}
	// A gzip bomb: small compressed, large decompressed. Reading stops at the limit; the
	// lines before it are stored (the one series big.v).
	zb.Reset()
	zw = gzip.NewWriter(&zb)
	zw.Write(big)
	zw.Close()
	if w := post(t, h, "", zb.Bytes(), map[string]string{"Content-Encoding": "gzip"}); w.Code != 413 || !strings.Contains(w.Body.String(), "decompressed body exceeds the limit of 1000") {
		t.Errorf("gzip bomb POST = %d %s; want 413", w.Code, w.Body)
	}
	if s := p.Stats(); s.WriteLines != 2+1000/8 || s.WriteTooLarge != 2 {
		t.Errorf("after the bomb: %d lines stored, %d requests too large; want the %d lines before the limit, 2", s.WriteLines, s.WriteTooLarge, 2+1000/8)
	}
	// A body that declares its length over the limit is refused before anything is stored.
	if w := post(t, h, "", append([]byte("early v=1\n"), big...), nil); w.Code != 413 {
		t.Errorf("big POST = %d %s; want 413", w.Code, w.Body)
	}
	if _, ok := collect(t, p).Values[key(pl(series.Labels{"metric": "early.v"}))]; ok {
		t.Error("a line of a body refused for its Content-Length was stored")
	}
	// Series limit: 3 held (z t=1, t=2, big), 1 more allowed.
	w := post(t, h, "", []byte("z,t=3 v=3\nz,t=4 v=4\nz,t=1 v=5\n"), nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "max-series limit exceeded") || !strings.Contains(w.Body.String(), `"lines":[2]`) {
		t.Errorf("over-limit POST = %d %s; want 400 naming line 2", w.Code, w.Body)
	}
	if w := post(t, h, "?precision=fortnight", []byte("a v=1"), nil); w.Code != 400 {
		t.Errorf("bad precision = %d; want 400", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, "/write", nil)
	rw := httptest.NewRecorder()
	h.ServeHTTP(rw, r)
	if rw.Code != 405 {
		t.Errorf("GET /write = %d; want 405", rw.Code)
	}
}

func TestStatsdAggregation(t *testing.T) {
	p, clk := newTestPush(Config{Expire: time.Minute})
	var l StatsdLine
	p.handleStatsd([]byte(strings.Join([]string{
		"hits:1|c",
		"hits:1|c|@0.1",      // counts 10
		"hits:2|c|#env:prod", // another series
		"temp:20|g",
		"temp:+5|g",
		"temp:-2.5|g",
		"lat:10|ms",
		"lat:20|ms|@0.5", // counts 2
		"lat:30:40|h",    // packed values
		"users:alice|s",
		"users:bob|s",
		"users:alice|s",
		"bad line",
		"x:1|zz",
		"y:abc|c",
		"hits:1|g", // hits is a counter
		"_e{5,4}:title|text",
		"",
	}, "\n")), &l)
	st := p.Stats()
	if st.StatsdLines != 12 || st.StatsdRejected != 5 {
		t.Errorf("Stats = %+v; want 12 lines, 5 rejected", st)
	}
	rec := collect(t, p)
	get := func(l series.Labels) (uint64, bool) { v, ok := rec.Values[l.Key()]; return v, ok }
	f := func(l series.Labels) float64 { v, _ := get(l); return math.Float64frombits(v) }
	if v, _ := get(pl(series.Labels{"metric": "hits"})); v != 11 {
		t.Errorf("hits = %d; want 11", v)
	}
	if v, _ := get(pl(series.Labels{"metric": "hits", "env": "prod"})); v != 2 {
		t.Errorf("hits{env=prod} = %d; want 2", v)
	}
	if v := f(pl(series.Labels{"metric": "temp"})); v != 22.5 {
		t.Errorf("temp = %v; want 22.5", v)
	}
	if v, _ := get(pl(series.Labels{"metric": "lat.count"})); v != 5 {
		t.Errorf("lat.count = %d; want 5", v)
	}
	// sum, as count, scales each value by its sample rate: 10 + 20/0.5 + 30 + 40.
	for name, want := range map[string]float64{"min": 10, "max": 40, "mean": 25, "median": 25, "p90": 37, "p99": 39.7, "sum": 120} {
		if v := f(pl(series.Labels{"metric": "lat." + name})); math.Abs(v-want) > 1e-9 {
			t.Errorf("lat.%s = %v; want %v", name, v, want)
		}
	}
	if v, _ := get(pl(series.Labels{"metric": "users"})); v != 2 {
		t.Errorf("users = %d; want 2", v)
	}
	if probs := rec.Problems["statsd"]; len(probs) != 1 || !strings.Contains(probs[0], "5 malformed") {
		t.Errorf("problems = %v; want one report of 5 malformed lines", probs)
	}
	// Next interval: nothing arrived, nothing is stored (a gap, the series held).
	clk.t = clk.t.Add(2 * time.Second)
	rec = collect(t, p)
	for _, m := range []string{"lat.p90", "lat.count", "users", "hits", "temp"} {
		if v, ok := get(pl(series.Labels{"metric": m})); ok {
			t.Errorf("%s = %d stored for an interval without values; want a gap", m, v)
		}
	}
	// Then one increment: the counter goes on from its total.
	p.handleStatsd([]byte("hits:4|c\n"), &l)
	rec = collect(t, p)
	if v, _ := get(pl(series.Labels{"metric": "hits"})); v != 15 {
		t.Errorf("hits = %d; want 15 (11 + 4)", v)
	}
}

func TestParseStatsdLine(t *testing.T) {
	var l StatsdLine
	if err := ParseStatsdLine([]byte("page.views:1.5|c|@0.25|#env:prod,flag,az:us-1|T1700000000|c:abc"), &l); err != nil {
		t.Fatal(err)
	}
	if l.Name != "page.views" || l.Type != statsdCounter || l.Rate != 0.25 || len(l.Values) != 1 || l.Values[0] != "1.5" {
		t.Errorf("parsed %+v", l)
	}
	if len(l.Tags) != 3 || l.Tags[0] != (kv{"az", "us-1"}) || l.Tags[1] != (kv{"env", "prod"}) || l.Tags[2] != (kv{"flag", ""}) {
		t.Errorf("tags = %v; want sorted az, env, flag", l.Tags)
	}
	for _, bad := range []string{"", "x", "x:1", ":1|c", "x:|c", "x:1|c|@0", "x:1|c|@2", "x:1|c|@x", "x:NaN|g", "x:1|c|#metric:y",
		"x:1|c|#a:1,a:2", "x:1|c|zz", "x:++1|g", "x:1::2|ms", "x\x01:1|c", "_sc|name|0"} {
		if err := ParseStatsdLine([]byte(bad), &l); err == nil {
			t.Errorf("ParseStatsdLine(%q) = nil error; want error", bad)
		}
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4}
	for q, want := range map[float64]float64{0: 1, 0.5: 2.5, 1: 4, 0.99: 3.97} {
		if got := quantile(v, q); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantile(%v, %v) = %v; want %v", v, q, got, want)
		}
	}
}

func TestTimerReservoirBounded(t *testing.T) {
	p, _ := newTestPush(Config{MaxTimerSamples: 100})
	var l StatsdLine
	var b strings.Builder
	for i := range 10000 {
		b.WriteString("t:")
		b.WriteString(strconv.Itoa(i))
		b.WriteString("|ms\n")
	}
	p.handleStatsd([]byte(b.String()), &l)
	for _, e := range p.entries {
		if len(e.timer.values) != 100 || e.timer.n != 10000 {
			t.Fatalf("reservoir holds %d of %d; want 100 of 10000", len(e.timer.values), e.timer.n)
		}
	}
	rec := collect(t, p)
	med := math.Float64frombits(rec.Values[pl(series.Labels{"metric": "t.median"}).Key()])
	if med < 3000 || med > 7000 {
		t.Errorf("reservoir median = %v; want near 5000", med)
	}
	if mx := math.Float64frombits(rec.Values[pl(series.Labels{"metric": "t.max"}).Key()]); mx != 9999 {
		t.Errorf("max = %v; want exact 9999", mx)
	}
}

// While the history of pushed series fills its budget (registry.PushedFull), a push is refused
// on arrival with the reason, and taken again once there is room. (issue 31, N11)
func TestPushRefusedWhileHistoryFull(t *testing.T) {
	full := true
	p, _ := newTestPush(Config{HistoryFull: func() bool { return full }})
	w := post(t, p.WriteHandler(), "", []byte("m v=1"), nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "history of pushed series") {
		t.Errorf("full: %d %s; want 400 naming the history budget", w.Code, w.Body)
	}
	full = false
	if w := post(t, p.WriteHandler(), "", []byte("m v=1"), nil); w.Code != 204 {
		t.Errorf("room again: %d %s; want 204", w.Code, w.Body)
	}
}
