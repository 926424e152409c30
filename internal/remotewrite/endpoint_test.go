package remotewrite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/histread"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

// receiver is an httptest remote-write receiver that records every sample and answers with
// status() (204 when it returns 0).
type receiver struct {
	mu      sync.Mutex
	got     map[string][]sample // by __name__ + labels
	reqs    int
	status  func() int
	headers http.Header
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	r := &receiver{got: map[string][]sample{}, status: func() int { return 0 }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if code := r.status(); code != 0 {
			http.Error(w, "not now", code)
			return
		}
		body, _ := io.ReadAll(req.Body)
		ts, err := decodeRequest(body)
		if err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		r.reqs++
		r.headers = req.Header.Clone()
		for _, s := range ts {
			k := ""
			for _, l := range s.Labels {
				k += l.Name + "=" + l.Value + ","
			}
			r.got[k] = append(r.got[k], s.Samples...)
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) samples(key string) []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sample(nil), r.got[key]...)
}

// scans commits n scans of a counter (value = scan number) and a level into h from t0.
func scans(t *testing.T, h *history.Store, t0 int64, from, n int) {
	t.Helper()
	c, err := h.Series(`{"metric":"requests"}`, series.Counter)
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.Series(`{"metric":"temp","room":"a"}`, series.Level)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+n; i++ {
		h.Begin(t0 + int64(i)*2000)
		h.Add(c, uint64(i))
		if i%3 != 0 { // a gap every third scan: never invented
			h.Add(l, uint64(int64(-i)))
		}
		h.Commit()
	}
}

const counterKey = "__name__=requests_total,instance=n1:22682,node=n1,"
const levelKey = "__name__=temp,instance=n1:22682,node=n1,room=a,"

// testPosition is url's position file in a fresh state directory.
func testPosition(t *testing.T, url string) *statedir.PositionFile {
	t.Helper()
	d, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Position(statedir.RemoteWrite, url, RedactURL(url))
}

func newEndpoint(t *testing.T, url string, h *history.Store, pos *statedir.PositionFile) *Endpoint {
	t.Helper()
	cfg, err := FromURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queue.MinBackoff, cfg.Queue.MaxBackoff = 1e6, 1e7 // 1ms, 10ms
	cfg.Queue.MaxBatchBytes = 1024                        // several requests per scan
	cfg.Queue.ReadBytes = 1024                            // 21 points per series per read
	e, err := New(cfg, Options{Source: h, Position: pos, Interval: 2 * time.Second,
		DefaultLabels: []Label{{"instance", "n1:22682"}, {"node", "n1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func checkCounter(t *testing.T, got []sample, t0 int64, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("counter: %d samples; want %d", len(got), n)
	}
	for i, s := range got {
		if s.TS != t0+int64(i)*2000 || s.V != float64(i) {
			t.Fatalf("counter sample %d = %+v; want {%d %d}", i, s, t0+int64(i)*2000, i)
		}
	}
}

func TestEndpointOutageRestart(t *testing.T) {
	rcv, srv := newReceiver(t)
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second, BlockScans: 16})
	t0 := time.Now().Add(-30 * time.Minute).UnixMilli()
	pos := testPosition(t, srv.URL)

	// The receiver is down while 100 scans are held (some in closed segments, some open).
	var down sync.Mutex
	isDown := true
	rcv.status = func() int {
		down.Lock()
		defer down.Unlock()
		if isDown {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	scans(t, h, t0, 0, 100)
	e := newEndpoint(t, srv.URL, h, pos)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	waitFor(t, "retries", func() bool { return e.Status().Retries >= 3 })
	if st := e.Status(); st.PositionMs != 0 || !st.Retrying || st.SamplesSent != 0 {
		t.Errorf("during the outage: %+v", st)
	}
	down.Lock()
	isDown = false
	down.Unlock()
	waitFor(t, "catch-up", func() bool { return e.Status().PositionMs == t0+99*2000 })
	checkCounter(t, rcv.samples(counterKey), t0, 100)
	lv := rcv.samples(levelKey)
	if len(lv) != 66 {
		t.Errorf("level: %d samples; want 66 (no point invented in the gaps)", len(lv))
	}
	for i := 1; i < len(lv); i++ {
		if lv[i].TS <= lv[i-1].TS {
			t.Fatalf("level samples out of order at %d: %v", i, lv[i-1:i+1])
		}
	}
	cancel()
	<-done
	st := e.Status()
	if st.SamplesSent != 166 || st.FailedBatches != 0 || st.LagS != 0 {
		t.Errorf("status after catch-up: %+v", st)
	}
	if rcv.headers.Get("Content-Encoding") != "snappy" || rcv.headers.Get("X-Prometheus-Remote-Write-Version") != "0.1.0" {
		t.Errorf("headers %v", rcv.headers)
	}
	p, err := pos.Load()
	if err != nil || p.AckedMs != t0+99*2000 {
		t.Fatalf("persisted position %+v, %v; want %d", p, err, t0+99*2000)
	}

	// A restart: a new endpoint on the same position sends only what came since.
	scans(t, h, t0, 100, 10)
	e2 := newEndpoint(t, srv.URL, h, pos)
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- e2.Run(ctx2) }()
	waitFor(t, "resume", func() bool { return e2.Status().PositionMs == t0+109*2000 })
	cancel2()
	<-done
	checkCounter(t, rcv.samples(counterKey), t0, 110)
}

func TestEndpointRefused(t *testing.T) {
	rcv, srv := newReceiver(t)
	rcv.status = func() int { return http.StatusBadRequest }
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	scans(t, h, time.Now().UnixMilli()-60_000, 0, 3)
	e := newEndpoint(t, "http://user:secret@"+srv.Listener.Addr().String()+"/api/v1/write", h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	waitFor(t, "drops", func() bool { return e.Status().DroppedSamples == 5 })
	cancel()
	<-done
	st := e.Status()
	if st.FailedBatches != 3 || st.SamplesSent != 0 || st.Retries != 0 {
		t.Errorf("status %+v; want 3 failed batches, no retry", st)
	}
	for _, s := range []string{st.URL, st.LastError} {
		if contains(s, "secret") || contains(s, "user") {
			t.Errorf("status shows credentials: %q", s)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestValueScale: a unit scale whose inverse is an integer divides, as /metrics does, so that
// 1234567 ms is exactly 1234.567 s.
func TestValueScale(t *testing.T) {
	e := &Endpoint{cache: map[history.ID]*seriesInfo{}, opt: Options{Namer: func(series.Labels, series.Kind) []Named {
		return []Named{{Name: "x_seconds_total", Scale: 0.001}}
	}}}
	si := e.info(&histread.Series{ID: 1, Key: `{"metric":"x_ms"}`, Kind: series.Counter})
	if got := value(si.kind, &si.outs[0], 1234567); got != 1234.567 {
		t.Errorf("value = %v; want 1234.567", got)
	}
	si = e.info(&histread.Series{ID: 2, Key: `{"metric":"t"}`, Kind: series.Float})
	if got := value(si.kind, &si.outs[0], math.Float64bits(-2.5)); got != -0.0025 {
		t.Errorf("value = %v; want -0.0025", got)
	}
}

// TestEndpointSeriesSentUnderEveryName: a series the Namer names twice (a container's cgroup
// series, also under its cAdvisor name) reaches the receiver under both names, every point of
// every scan with its own scale, in scan order across batches; the status counts both samples.
func TestEndpointSeriesSentUnderEveryName(t *testing.T) {
	rcv, srv := newReceiver(t)
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second, BlockScans: 16})
	t0 := time.Now().Add(-10 * time.Minute).UnixMilli()
	scans(t, h, t0, 0, 40)
	cfg, err := FromURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queue.MinBackoff, cfg.Queue.MaxBackoff = 1e6, 1e7
	cfg.Queue.MaxBatchBytes = 256 // a scan's samples split over requests
	e, err := New(cfg, Options{Source: h, Interval: 2 * time.Second, DefaultLabels: []Label{{"node", "n1"}},
		Namer: func(l series.Labels, k series.Kind) []Named {
			if l["metric"] != "requests" {
				return nil
			}
			return []Named{{Name: "requests_total", Scale: 1},
				{Name: "container_requests_seconds_total", Labels: []Label{{"name", "web-1"}, {"image", ""}}, Scale: 0.001}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	waitFor(t, "catch-up", func() bool { return e.Status().PositionMs == t0+39*2000 })
	cancel()
	<-done
	own := rcv.samples("__name__=requests_total,node=n1,")
	twin := rcv.samples("__name__=container_requests_seconds_total,name=web-1,node=n1,")
	if len(own) != 40 || len(twin) != 40 {
		t.Fatalf("%d and %d samples; want 40 under each name (got %v)", len(own), len(twin), rcv.got)
	}
	for i := range own {
		ts := t0 + int64(i)*2000
		if own[i] != (sample{ts, float64(i)}) || twin[i] != (sample{ts, float64(i) / 1000}) {
			t.Fatalf("scan %d: %+v and %+v; want {%d %d} and {%d %g}", i, own[i], twin[i], ts, i, ts, float64(i)/1000)
		}
	}
	if st := e.Status(); st.SamplesSent != 80 || st.DroppedSamples != 0 {
		t.Errorf("status %+v; want 80 samples sent", st)
	}
}

// TestEndpointTooManyRequests: a 429 is retried (its Retry-After capped by max_backoff), not
// dropped.
func TestEndpointTooManyRequests(t *testing.T) {
	rcv, srv := newReceiver(t)
	var mu sync.Mutex
	left := 3
	rcv.status = func() int {
		mu.Lock()
		defer mu.Unlock()
		if left > 0 {
			left--
			return http.StatusTooManyRequests
		}
		return 0
	}
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	t0 := time.Now().UnixMilli() - 60_000
	scans(t, h, t0, 0, 4)
	e := newEndpoint(t, srv.URL, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	waitFor(t, "delivery", func() bool { return e.Status().PositionMs == t0+3*2000 })
	cancel()
	<-done
	if st := e.Status(); st.Retries != 3 || st.DroppedSamples != 0 || st.SamplesSent != 6 {
		t.Errorf("status %+v; want 3 retries, 6 samples sent, none dropped", st)
	}
	checkCounter(t, rcv.samples(counterKey), t0, 4)
}

// TestEndpointLatePoints: a pushed series (Options.Late) gets a point late, at a scan the
// endpoint has already sent the other series of. It reaches the receiver, once, and every
// series arrives in strictly ascending time (Prometheus's in-order rule), because late series
// are sent only up to the history's final scans (BackfillFrom).
func TestEndpointLatePoints(t *testing.T) {
	rcv, srv := newReceiver(t)
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second, BlockScans: 16, GraceScans: 8})
	cfg, err := FromURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queue.MinBackoff, cfg.Queue.MaxBackoff = 1e6, 1e7
	pos := testPosition(t, srv.URL)
	e, err := New(cfg, Options{Source: h, Position: pos, Interval: 2 * time.Second,
		DefaultLabels: []Label{{"instance", "n1:22682"}, {"node", "n1"}},
		Late:          func(l series.Labels) bool { return l["source"] == "push" }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Series(`{"metric":"requests"}`, series.Counter)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Series(`{"metric":"jobs","source":"push"}`, series.Level)
	if err != nil {
		t.Fatal(err)
	}
	const pushedKey = "__name__=jobs,instance=n1:22682,node=n1,source=push,"
	t0 := time.Now().Add(-10 * time.Minute).UnixMilli()
	at := func(i int) int64 { return t0 + int64(i)*2000 }
	ctx := context.Background()
	const n = 60
	var lateSentAt, maxBehind int64
	for i := range n {
		h.Begin(at(i))
		h.Add(c, uint64(i))
		if i%2 == 0 { // pushed at even scans only
			h.Add(p, uint64(i))
		}
		if i == 7 { // the point of scan 3, pushed 8 s late: scan 3 is already sent
			if ts, err := h.AddAt(p, at(3)-500, 3); err != nil || ts != at(3) {
				t.Fatalf("AddAt: %d, %v", ts, err)
			}
			if st := e.Status(); st.PositionMs < at(3) {
				t.Fatalf("scan 3 not sent before the late point: %+v", st)
			}
		}
		h.Commit()
		if err := e.catchUp(ctx); err != nil {
			t.Fatal(err)
		}
		st := e.Status()
		if st.PositionMs != at(i) {
			t.Fatalf("scan %d: position %d; want %d (scanned series are not held back)", i, st.PositionMs, at(i))
		}
		if bf := h.BackfillFrom(); st.LatePositionMs > bf {
			t.Fatalf("scan %d: late position %d after BackfillFrom %d", i, st.LatePositionMs, bf)
		}
		if i > 30 {
			maxBehind = max(maxBehind, (at(i)-st.LatePositionMs)/2000)
		}
		if lateSentAt == 0 && len(rcv.samples(pushedKey)) > 2 {
			lateSentAt = int64(i)
		}
	}
	e.persist(true)
	for _, key := range []string{counterKey, pushedKey} {
		got := rcv.samples(key)
		for i := 1; i < len(got); i++ {
			if got[i].TS <= got[i-1].TS {
				t.Fatalf("%s: sample %d at %d after %d: out of order for Prometheus", key, i, got[i].TS, got[i-1].TS)
			}
		}
	}
	checkCounter(t, rcv.samples(counterKey), t0, n)
	got := rcv.samples(pushedKey)
	final := e.Status().LatePositionMs
	var want []sample
	for i := 0; at(i) <= final; i++ {
		if i%2 == 0 || i == 3 {
			want = append(want, sample{TS: at(i), V: float64(i)})
		}
	}
	if len(want) < 10 || len(got) != len(want) {
		t.Fatalf("pushed series: %d samples %v; want %d up to %d", len(got), got, len(want), final)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pushed sample %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	pf, err := pos.Load()
	if err != nil || pf.AckedMs != at(n-1) || pf.LateMs != final {
		t.Fatalf("position file %+v, %v; want acked %d, late %d", pf, err, at(n-1), final)
	}
	// The hold-back: at most one segment, the grace scans and MaxSlot behind the newest scan.
	if maxBehind > 16+8+5 {
		t.Errorf("pushed series held back up to %d scans; want at most 29", maxBehind)
	}
	t.Logf("pushed series: first sent at scan %d; held back at most %d scans (16-scan segments, 8 grace)", lateSentAt, maxBehind)
}

// BenchmarkSteadyLate: one scan of 5000 scanned and 1000 pushed series committed and sent per
// op, with the pushed series held back until final (late=on: a second pass over the history
// once per segment) and without (late=off: every series sent as committed), side by side.
func BenchmarkSteadyLate(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, late := range []bool{false, true} {
		name := "late=off"
		if late {
			name = "late=on"
		}
		b.Run(name, func(b *testing.B) {
			h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second, BlockScans: 64, GraceScans: 8})
			var ids []history.ID
			for i := range 6000 {
				key := `{"metric":"m","i":"` + strconv.Itoa(i) + `"}`
				if i >= 5000 {
					key = `{"metric":"p","i":"` + strconv.Itoa(i) + `","source":"push"}`
				}
				id, err := h.Series(key, series.Level)
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
			}
			cfg, err := FromURL(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			opt := Options{Source: h, Interval: 2 * time.Second}
			if late {
				opt.Late = func(l series.Labels) bool { return l["source"] == "push" }
			}
			e, err := New(cfg, opt)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			t0 := time.Now().Add(-time.Hour).UnixMilli()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				h.Begin(t0 + int64(i)*2000)
				for j, id := range ids {
					h.Add(id, uint64(i+j))
				}
				h.Commit()
				if err := e.catchUp(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// CPU time of the process (the test receiver included), not wall time: the machine
			// is shared.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			st := e.Status()
			b.ReportMetric(float64(st.SamplesSent)/float64(b.N), "samples/op")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLatePositionOldFile: a position file from before late positions existed (pushed series
// were sent with the others) resumes the pushed series from acked_ms, not from the oldest point
// held; a file with late_ms resumes them from there. Both are the files earlier versions kept
// in <state-dir>/remote-write/rw-<hash of the URL>.json: an upgraded node keeps its place.
func TestLatePositionOldFile(t *testing.T) {
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	for _, c := range []struct {
		file string
		want int64
	}{
		{`{"url":"http://h/w","acked_ms":1700000000000}`, 1700000000000},
		{`{"url":"http://h/w","acked_ms":1700000000000,"late_ms":1699999900000}`, 1699999900000},
	} {
		dir := t.TempDir()
		sum := sha256.Sum256([]byte("http://h/w"))
		old := filepath.Join(dir, "remote-write", "rw-"+hex.EncodeToString(sum[:8])+".json")
		os.MkdirAll(filepath.Dir(old), 0o700)
		if err := os.WriteFile(old, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := statedir.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		cfg, err := FromURL("http://h/w")
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(cfg, Options{Source: h, Position: d.Position(statedir.RemoteWrite, "http://h/w", "http://h/w")})
		if err != nil {
			t.Fatal(err)
		}
		if st := e.Status(); st.PositionMs != 1700000000000 || st.LatePositionMs != c.want {
			t.Errorf("%s: position %d, late %d; want late %d", c.file, st.PositionMs, st.LatePositionMs, c.want)
		}
	}
}

// A receiver's own text (here "not now", and a reason phrase of its own) is in LastError for
// the agent's administrators, and not in what ForReaders leaves: the status code and its
// standard text. Refused and retried requests alike. (issue 31, N12)
func TestLastErrorForReadersWithoutReceiverText(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
		rcv, srv := newReceiver(t)
		rcv.status = func() int { return code }
		h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
		scans(t, h, time.Now().UnixMilli()-60_000, 0, 3)
		e := newEndpoint(t, "http://"+srv.Listener.Addr().String()+"/api/v1/write", h, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		waitFor(t, "an error", func() bool { return e.Status().LastError != "" })
		cancel()
		<-done
		st := e.Status()
		if !strings.Contains(st.LastError, "not now") {
			t.Errorf("%d: LastError %q; want the receiver's text for administrators", code, st.LastError)
		}
		r := st.ForReaders()
		want := fmt.Sprintf("%d %s", code, http.StatusText(code))
		if strings.Contains(r.LastError, "not now") || !strings.Contains(r.LastError, want) {
			t.Errorf("%d: for readers %q; want %q without the receiver's text", code, r.LastError, want)
		}
	}
}
