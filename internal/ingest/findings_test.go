package ingest

// Regression tests for the security issue's findings 2, 4, 5 and 7 (each was demonstrated
// against the agent): they drive a Push the way the agent does, some of them into a real
// registry and history store beside a fake collector of the machine's and an application's
// series.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// fakeCollector puts series the way the agent's own collectors do: the machine's (named as
// internal/sysscan names them, {"metric": "system.load_avg_1min"}), an application's (with the
// pid and process the agent adds) every scan, a disk's only every third scan (a series that is
// not live in every scan, as the old --max-series eviction would drop) and a process's that
// exits after the first scan.
type fakeCollector struct {
	scan int
	refs map[string]*series.Ref
}

// collectedLabels are the fake collector's series, and how often each is written (every n-th
// scan; 0: the first scan only).
var collectedLabels = []struct {
	l     series.Labels
	kind  series.Kind
	every int
}{
	{series.Labels{"metric": "system.load_avg_1min"}, series.Float, 1},
	{series.Labels{"metric": "memory.free"}, series.Level, 1},
	{series.Labels{"metric": "cpu.user_ms", "cpu": "0"}, series.Counter, 1},
	{series.Labels{"metric": "requests", "pid": "42", "process": "app"}, series.Counter, 1},
	{series.Labels{"metric": "disk.read_ops", "device": "sda"}, series.Counter, 3},
	{series.Labels{"metric": "process.cpu_ms", "pid": "7", "process": "short"}, series.Counter, 0},
}

func (c *fakeCollector) Collect(_ context.Context, sink series.Sink) error {
	if c.refs == nil {
		c.refs = map[string]*series.Ref{}
	}
	for _, cl := range collectedLabels {
		if (cl.every == 0 && c.scan > 0) || (cl.every > 0 && c.scan%cl.every != 0) {
			continue
		}
		k := cl.l.Key()
		if c.refs[k] == nil {
			c.refs[k] = sink.Series(cl.l.Clone(), cl.kind)
		}
		v := uint64(1000 + c.scan)
		if cl.kind == series.Float {
			v = math.Float64bits(0.5)
		}
		sink.Put(c.refs[k], v)
	}
	c.scan++
	return nil
}

// written returns how many scans of n (numbered from 0) the fake collector writes a series into.
func written(every, n int) int {
	if every == 0 {
		return 1
	}
	return (n + every - 1) / every
}

// agentRig is a Push and the fake collector scanned into a real registry and history, as the
// agent scans its collectors.
type agentRig struct {
	t    *testing.T
	push *Push
	clk  *clock
	coll *fakeCollector
	reg  *registry.Registry
	hist *history.Store
	ts   int64
	n    int // scans
}

func newAgentRig(t *testing.T, cfg Config) *agentRig {
	t.Helper()
	push, clk := newTestPush(cfg)
	hist := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second, BlockScans: 16})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	return &agentRig{t: t, push: push, clk: clk, coll: &fakeCollector{}, reg: reg, hist: hist, ts: clk.t.UnixMilli()}
}

// scan runs one scan: the collector, then the push, as the agent's scan loop does.
func (a *agentRig) scan() {
	a.t.Helper()
	a.clk.t = a.clk.t.Add(2 * time.Second)
	a.ts += 2000
	a.reg.Begin(a.ts)
	for _, c := range []series.Collector{a.coll, a.push} {
		if err := c.Collect(a.t.Context(), a.reg); err != nil {
			a.t.Fatal(err)
		}
	}
	a.reg.Commit()
	a.n++
}

// checkCollected checks that every collected series is in the registry with every point the
// collector wrote, in the history, and that the machine's load average is the collector's.
func (a *agentRig) checkCollected() {
	a.t.Helper()
	keys := map[string]registry.Handle{}
	a.reg.View().Each(func(h registry.Handle) bool {
		keys[h.Key()] = h
		return true
	})
	for _, cl := range collectedLabels {
		k := cl.l.Key()
		h, ok := keys[k]
		if !ok {
			a.t.Errorf("collected series %s is gone from the registry", k)
			continue
		}
		id, _, ok := a.hist.Lookup(k)
		if !ok || id != h.HistoryID() {
			a.t.Errorf("collected series %s is gone from the history", k)
			continue
		}
		pts := 0
		a.hist.Range(id, 0, math.MaxInt64, func(_ int64, bits uint64) bool {
			pts++
			if cl.kind == series.Float && math.Float64frombits(bits) != 0.5 {
				a.t.Errorf("%s holds %v; want the collector's 0.5 only", k, math.Float64frombits(bits))
			}
			return true
		})
		if want := written(cl.every, a.n); pts != want {
			a.t.Errorf("collected series %s has %d points; want the %d the collector wrote", k, pts, want)
		}
	}
}

// TestPushNeverCollidesWithCollected pushes the machine's own series name with every
// protocol and tag trick: none lands on the collected series, which keeps its value in the
// registry and history; every pushed series is labelled source="push", a pushed source="push"
// tag changes nothing and any other source tag is rejected.
//
// Security finding 2.
func TestPushNeverCollidesWithCollected(t *testing.T) {
	a := newAgentRig(t, Config{})
	a.scan()
	h := a.push.WriteHandler()
	if w := post(t, h, "", []byte("system load_avg_1min=0.01\nsystem,source=push load_avg_1min=0.02\n"), nil); w.Code != 204 {
		t.Fatalf("POST = %d %s; want 204", w.Code, w.Body)
	}
	w := post(t, h, "", []byte("system,source=collected load_avg_1min=0.03\nsystem,source=machine load_avg_1min=0.04\n"), nil)
	if w.Code != 400 || strings.Count(w.Body.String(), `tag key \"source\" is reserved`) != 2 {
		t.Errorf("POST with source tags = %d %s; want both lines rejected for the reserved tag", w.Code, w.Body)
	}
	var l StatsdLine
	a.push.handleStatsd([]byte("system.load_avg_1min:0.05|g\nsystem.load_avg_1min:0.06|g|#source:push\nsystem.load_avg_1min:0.07|g|#source:\nsystem:1|ms"), &l)
	if st := a.push.Stats(); st.StatsdLines != 3 || st.StatsdRejected != 1 {
		t.Errorf("statsd stats = %+v; want 3 accepted, 1 rejected (the empty source tag)", st)
	}
	for range 3 {
		a.scan()
	}
	a.checkCollected()
	pushedKey := pl(series.Labels{"metric": "system.load_avg_1min"}).Key()
	var pushed []string
	a.reg.View().Each(func(h registry.Handle) bool {
		lb := h.Labels()
		if lb["metric"] == "system.load_avg_1min" && h.Key() != collectedLabels[0].l.Key() {
			pushed = append(pushed, h.Key())
			if h.Key() != pushedKey {
				t.Errorf("pushed series %s; want only %s", h.Key(), pushedKey)
			}
		}
		if lb[SourceLabel] == SourceValue && strings.HasPrefix(lb["metric"], "ingest.") {
			t.Errorf("the push's own series %s is labelled as pushed", h.Key())
		}
		return true
	})
	// The line protocol and statsd series share the key: two entries of the Push put it.
	if len(pushed) != 1 {
		t.Errorf("pushed load average series = %v; want one, %s", pushed, pushedKey)
	}
	if v := a.reg.View(); v.Pushed != 1+9 || v.Evicted != 0 {
		t.Errorf("registry: %d pushed series, %d evicted; want 10 (the load average and a timer's 9), 0", v.Pushed, v.Evicted)
	}
	if registry.PushLabel != SourceLabel || registry.PushValue != SourceValue {
		t.Errorf("registry marks pushed series with %s=%q; ingest labels them %s=%q", registry.PushLabel, registry.PushValue, SourceLabel, SourceValue)
	}
}

// TestLabelLimitsRejectLine pushes labels over each limit: the line (or statsd line) is
// rejected, the error gives sizes and never the oversized text, and nothing is stored.
//
// Security finding 4.
func TestLabelLimitsRejectLine(t *testing.T) {
	p, _ := newTestPush(Config{})
	huge := strings.Repeat("A", 1<<19)
	many := make([]string, 31)
	for i := range many {
		many[i] = fmt.Sprintf("t%d=v", i)
	}
	for _, tc := range []struct{ line, want string }{
		{"m,host=" + huge + " v=1", `value of tag "host": 524288 bytes exceeds the limit of 4096`},
		{"m," + huge + "=x v=1", "tag key of 524288 bytes exceeds the limit of 256"},
		{"m " + huge + "=1", "metric name of 524290 bytes exceeds the limit of 4096"},
		{huge + " v=1", "metric name of 524290 bytes exceeds the limit of 4096"},
		{`m s="` + huge + `"`, `string field "s": 524288 bytes exceeds the limit of 4096`},
		{"m,host=" + huge + huge + " v=1", "line longer than 1048576 bytes"},
		{"m," + strings.Join(many, ",") + " v=1", "33 labels exceed the limit of 32 per series"},
	} {
		w := post(t, p.WriteHandler(), "", []byte(tc.line), nil)
		var ans struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &ans)
		if w.Code != 400 || !strings.Contains(ans.Error, tc.want) {
			t.Errorf("POST %.40q... = %d %.300s; want 400 saying %q", tc.line, w.Code, w.Body, tc.want)
		}
		if w.Body.Len() > 600 || strings.Contains(w.Body.String(), strings.Repeat("A", 65)) {
			t.Errorf("answer of %d bytes quotes the oversized text: %.200s", w.Body.Len(), w.Body)
		}
	}
	// 30 tags + metric + source is the most a series may have.
	if w := post(t, p.WriteHandler(), "", []byte("m,"+strings.Join(many[:30], ",")+" v=1"), nil); w.Code != 204 {
		t.Errorf("POST with 32 labels = %d %s; want 204", w.Code, w.Body)
	}
	var l StatsdLine
	p.handleStatsd([]byte(strings.Join([]string{
		"s:1|c|#host:" + huge[:60000],
		huge[:4094] + ":1|g",  // 4094 bytes: fits
		huge[:4094] + ":1|ms", // with ".median" it does not
		"s:1|c|#" + strings.Join(many, ",") + "",
	}, "\n")), &l)
	if st := p.Stats(); st.StatsdLines != 1 || st.StatsdRejected != 3 || st.Series != 2 {
		t.Errorf("statsd stats = %+v; want 1 accepted (the 4094-byte gauge), 3 rejected, 2 series held", st)
	}
	if len(p.lastBad) > 300 || strings.Contains(p.lastBad, strings.Repeat("A", 65)) {
		t.Errorf("the statsd problem quotes the oversized text: %.200q (%d bytes)", p.lastBad, len(p.lastBad))
	}
	checkPush(t, p)
}

// TestPushByteBudget pushes series with long (allowed) tag values until the byte budget
// is full: what the Push holds stays within MaxBytes, the rest is refused and counted, an
// existing series is still updated, and expiry gives the bytes back.
//
// Security finding 4.
func TestPushByteBudget(t *testing.T) {
	const budget = 1 << 20
	p, clk := newTestPush(Config{MaxBytes: budget, Expire: time.Minute})
	val := strings.Repeat("v", 4000)
	var body bytes.Buffer
	for i := range 1000 { // 1000 series of ~4.3 KB: 4 MB, four times the budget
		fmt.Fprintf(&body, "m,k=%s%04d v=1\n", val, i)
	}
	cost := int64(len(appendKey(nil, 'l', "m.v", []kv{{"k", val + "0000"}})) + seriesOverhead + pointBytes) // with its point until a scan stores it
	fit := int(budget / cost)
	w := post(t, p.WriteHandler(), "", body.Bytes(), nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "max-bytes limit exceeded (1048576 bytes of pushed series)") {
		t.Errorf("POST = %d %.300s; want 400 for the byte budget", w.Code, w.Body)
	}
	st := p.Stats()
	if st.Bytes != int64(fit)*cost || st.Series != fit || st.Refused != uint64(1000-fit) || fit < 200 {
		t.Errorf("Stats = %+v; want the budget full (%d series of %d bytes) and the other %d refused", st, fit, cost, 1000-fit)
	}
	if w := post(t, p.WriteHandler(), "", []byte("m,k="+val+"0000 v=2\n"), nil); w.Code != 204 {
		t.Errorf("update of a held series = %d %s; want 204", w.Code, w.Body)
	}
	// statsd: a timer's reservoir and a set's values grow only within the budget.
	var l StatsdLine
	var pkt bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&pkt, "t:%d|ms\nu:%d|s\n", i, i)
	}
	p.handleStatsd(pkt.Bytes(), &l)
	checkPush(t, p)
	if st := p.Stats(); st.Bytes > budget {
		t.Errorf("%d bytes held; want at most %d", st.Bytes, budget)
	}
	clk.t = clk.t.Add(2 * time.Minute)
	collect(t, p)
	if st := p.Stats(); st.Bytes != 0 || st.Series != 0 {
		t.Errorf("after expiry: %d bytes, %d series; want 0, 0", st.Bytes, st.Series)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// gzipRepeat returns a gzip body that decompresses to chunk repeated n times: one gzip member of
// chunk, repeated (a gzip stream may hold many members; Go's reader reads them all).
func gzipRepeat(t testing.TB, chunk []byte, n int) []byte {
	t.Helper()
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	zw.Write(chunk)
	zw.Close()
	return bytes.Repeat(zb.Bytes(), n)
}

// TestGzipBombStopsAtLimit posts a 1 GiB gzip bomb (about 1 MB compressed) with the
// default limits: the answer is 413 as soon as the decompressed body crosses MaxBodyBytes, the
// request reads only the compressed bytes that make up that much, and allocates a small part of
// it (the body is decoded as it is read, never held whole).
//
// Security finding 5.
func TestGzipBombStopsAtLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk string
		want  string
	}{
		// Comments are skipped, not counted as lines: the body limit stops it.
		{"comments", "# " + strings.Repeat("x", 62) + "\n", "decompressed body exceeds the limit of 33554432 bytes"},
		// Lines: the line limit stops it first.
		{"lines", "m v=1\n", "more than 100000 lines in one request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestPush(Config{})
			chunk := bytes.Repeat([]byte(tc.chunk), (1<<20)/len(tc.chunk))
			bomb := gzipRepeat(t, chunk, 1024)
			cr := &countingReader{r: bytes.NewReader(bomb)}
			r := httptest.NewRequest(http.MethodPost, "/write", cr)
			r.ContentLength = -1
			r.Header.Set("Content-Encoding", "gzip")
			rw := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p.WriteHandler().ServeHTTP(rw, r)
			runtime.ReadMemStats(&after)
			if rw.Code != 413 || !strings.Contains(rw.Body.String(), tc.want) {
				t.Fatalf("POST bomb = %d %s; want 413 saying %q", rw.Code, rw.Body, tc.want)
			}
			decompressed := int64(len(chunk)) * 1024
			if limit := int64(len(bomb))*(32<<20)/decompressed + 64<<10; cr.n > limit {
				t.Errorf("read %d of the bomb's %d compressed bytes; want at most %d (what 32 MiB decompressed take, plus a read)", cr.n, len(bomb), limit)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("the request allocated %d MiB; want at most 64", alloc>>20)
			}
			if st := p.Stats(); st.WriteTooLarge != 1 || st.WriteRequests != 1 {
				t.Errorf("Stats = %+v; want 1 request, too large", st)
			}
		})
	}
}

// TestRequestLineAndSeriesBounds checks the work one request may do: MaxRequestLines lines (one
// more is a 413, the lines before it stored) and MaxRequestNewSeries new series (the lines
// beyond are refused; the next request may create more).
//
// Security finding 5.
func TestRequestLineAndSeriesBounds(t *testing.T) {
	p, _ := newTestPush(Config{MaxRequestLines: 1000, MaxRequestNewSeries: 300})
	h := p.WriteHandler()
	var b bytes.Buffer
	for i := range 1001 {
		fmt.Fprintf(&b, "m v=%d\n", i)
	}
	w := post(t, h, "", b.Bytes(), nil)
	if w.Code != 413 || !strings.Contains(w.Body.String(), "more than 1000 lines") {
		t.Errorf("1001 lines = %d %s; want 413", w.Code, w.Body)
	}
	if st := p.Stats(); st.WriteLines != 1000 || st.WriteTooLarge != 1 {
		t.Errorf("Stats = %+v; want 1000 lines stored", st)
	}
	b.Reset()
	for i := range 200 {
		fmt.Fprintf(&b, "n,i=%d a=1,b=2\n", i) // two series a line
	}
	w = post(t, h, "", b.Bytes(), nil)
	var ans struct {
		Error string
		Lines []int
	}
	json.Unmarshal(w.Body.Bytes(), &ans)
	if w.Code != 400 || !strings.Contains(ans.Error, "more than 300 new series in one request") || len(ans.Lines) != 50 || ans.Lines[0] != 151 {
		t.Errorf("400 new series = %d %.300s (lines %v); want lines 151..200 refused", w.Code, ans.Error, ans.Lines)
	}
	if st := p.Stats(); st.Series != 1+300 || st.Refused != 50 {
		t.Errorf("Stats = %+v; want 301 series, 50 lines refused", st)
	}
	if w := post(t, h, "", b.Bytes(), nil); w.Code != 204 {
		t.Errorf("the same body again = %d %.300s; want 204 (100 new series)", w.Code, w.Body)
	}
}

// TestTimerCountsEverySeries checks that a statsd timer counts each of the series it
// produces against MaxSeries: with room for 20 series, two timers (9 series each) fit, a third
// does not, and the series collected are the 18 counted.
//
// Security finding 7.
func TestTimerCountsEverySeries(t *testing.T) {
	p, _ := newTestPush(Config{MaxSeries: 20})
	var l StatsdLine
	p.handleStatsd([]byte("a:1|ms\nb:1|h\nc:1|d\nd:1|c\n"), &l)
	st := p.Stats()
	if st.Series != 19 || st.StatsdLines != 3 || st.StatsdRejected != 1 || st.Refused != 1 {
		t.Errorf("Stats = %+v; want 19 series (2 timers, 1 counter), the third timer refused", st)
	}
	rec := collect(t, p)
	n := 0
	for _, ref := range rec.Refs() {
		if ref.Labels[SourceLabel] == SourceValue {
			n++
		}
	}
	if n != st.Series {
		t.Errorf("%d pushed series collected; Stats.Series = %d", n, st.Series)
	}
}

// TestPushFloodCannotEvictCollected floods the agent with pushed series — line protocol
// and statsd timers, tens of thousands of distinct names, in waves that expire — into a real
// registry and history limited to 40 collected series (--max-series) and 10000 pushed ones,
// beside a fake collector of the machine's and an application's series: no collected series
// loses its place or a point of its history; the flood is refused at the push budget (counted)
// and only pushed series are evicted.
//
// Security finding 7.
func TestPushFloodCannotEvictCollected(t *testing.T) {
	a := newAgentRig(t, Config{MaxSeries: 20000, Expire: 10 * time.Second})
	a.reg.SetMaxSeries(40)
	a.reg.SetMaxPushed(10000, 0)
	h := a.push.WriteHandler()
	var l StatsdLine
	name := 0
	for wave := range 4 {
		for range 3 {
			var b bytes.Buffer
			for range 2000 {
				fmt.Fprintf(&b, "flood%d,wave=%d v=1,w=2i\n", name, wave)
				name++
			}
			post(t, h, "", b.Bytes(), nil)
			var pkt bytes.Buffer
			for range 1000 {
				fmt.Fprintf(&pkt, "timer%d:%d|ms|#wave:%d\n", name, name%100, wave)
				name++
			}
			a.push.handleStatsd(pkt.Bytes(), &l)
			a.scan()
		}
		if st := a.push.Stats(); st.Series > 20000 || st.Series < 19000 {
			t.Fatalf("the push holds %d series; want its 20000, nearly", st.Series)
		}
		// Let the wave expire from the push (the registry keeps it for the retention).
		for range 6 {
			a.scan()
		}
	}
	a.checkCollected()
	st := a.push.Stats()
	v := a.reg.View()
	t.Logf("pushed %d names; push: %+v; registry: %d series, %d pushed, %d evicted (%d pushed)", name, st, v.Len(), v.Pushed, v.Evicted, v.EvictedPushed)
	if st.Refused == 0 || st.StatsdRejected == 0 || st.WriteRejected == 0 || st.StatsdLines < 4000 || st.WriteLines < 8000 {
		t.Errorf("push stats %+v: want lines of both protocols accepted and refused at the budget", st)
	}
	if v.Evicted == 0 || v.EvictedPushed != v.Evicted {
		t.Errorf("registry evicted %d series, %d of them pushed; want some, all pushed", v.Evicted, v.EvictedPushed)
	}
	if v.Pushed > 10000+20000 {
		t.Errorf("registry holds %d pushed series; want at most the 10000 of its limit plus the push's 20000 live", v.Pushed)
	}
	if hs := a.hist.Stats(); hs.Series > 10000+20000+len(collectedLabels)+len(selfNames) {
		t.Errorf("history holds %d series", hs.Series)
	}
	// The push's own series are collected series too.
	for _, n := range selfNames {
		if _, _, ok := a.hist.Lookup(series.Labels{"metric": n}.Key()); !ok {
			t.Errorf("self series %s evicted", n)
		}
	}
}
