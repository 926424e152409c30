package influx

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ecsmetrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	return rec.Body.String()
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string][2]string{
		"8088/ecsmetrics":           {":8088", "/ecsmetrics"},
		"9000/metrics/app":          {":9000", "/metrics/app"},
		"127.0.0.1:8088/ecsmetrics": {"127.0.0.1:8088", "/ecsmetrics"},
		"[::1]:80/x":                {"[::1]:80", "/x"},
		"0":                         {":0", "/"},
		"8088/":                     {":8088", "/"},
	} {
		addr, path, err := ParseEndpoint(in)
		if err != nil || addr != want[0] || path != want[1] {
			t.Errorf("ParseEndpoint(%q) = %q, %q, %v; want %q, %q", in, addr, path, err, want[0], want[1])
		}
	}
	for _, in := range []string{"", "/x", "http/x", "70000/x", "-1/x", "8088/a b", "host:/x", "[::1/x", "8088/x?y"} {
		if addr, path, err := ParseEndpoint(in); err == nil {
			t.Errorf("ParseEndpoint(%q) = %q, %q; want error", in, addr, path)
		}
	}
	if _, err := New(Config{Endpoint: "nope"}); err == nil {
		t.Error("New with a bad endpoint succeeded")
	}
	if _, err := New(Config{PushURL: "ftp://x"}); err == nil {
		t.Error("New with a non-HTTP push URL succeeded")
	}
}

func TestServe(t *testing.T) {
	mon := mustNew(t, Config{Endpoint: "0/ecsmetrics"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mon.Serve(ctx, ln) }()
	m := NewMetric("kafka", time.Unix(0, 1746457955000000000))
	m.AddTag("subsystem", "ECS")
	m.AddTag("topic", "aliecs.run")
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 42)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	for range 2 { // any number of scrapers read the same lines
		body, code := get(t, base+"/ecsmetrics")
		if want := "kafka,subsystem=ECS,topic=aliecs.run send_bytes=1638400u,sent_messages=42u 1746457955000000000\n"; code != 200 || body != want {
			t.Errorf("GET /ecsmetrics = %d %q; want 200 %q", code, body, want)
		}
	}
	if _, code := get(t, base+"/other"); code != http.StatusNotFound {
		t.Errorf("GET /other = %d; want 404", code)
	}
	resp, err := http.Post(base+"/ecsmetrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d; want 405", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestRunListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mon := mustNew(t, Config{Endpoint: ln.Addr().String() + "/x"})
	if err := mon.Run(context.Background()); err == nil {
		t.Error("Run on a busy port succeeded")
	}
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// agent is a fake cantal-agent POST /write: InfluxDB v1 semantics, parsed with line-protocol.
type agent struct {
	mu     sync.Mutex
	fail   int // answer 500 to this many requests first
	points []string
	posts  int
}

func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/write" {
		http.Error(w, "bad route", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.posts++
	if a.fail > 0 {
		a.fail--
		http.Error(w, `{"error":"busy"}`, http.StatusInternalServerError)
		return
	}
	ms, err := parseLines(body)
	if err != nil {
		http.Error(w, `{"error":"`+err.Error()+`"}`, http.StatusBadRequest)
		return
	}
	for _, m := range ms {
		a.points = append(a.points, m.String())
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *agent) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.points...)
}

func TestPush(t *testing.T) {
	ag := &agent{fail: 1}
	srv := httptest.NewServer(ag)
	defer srv.Close()
	mon := mustNew(t, Config{PushURL: srv.URL + "/write"})
	ctx := context.Background()

	old := NewMetric("old", time.Unix(1000, 5))
	old.AddTag("t", "1")
	old.SetFieldInt64("x", 1)
	if err := mon.Send(&old); err != nil {
		t.Fatal(err)
	}
	current := NewMetric("current", time.Time{}) // this second: not complete yet
	current.SetFieldInt64("y", 1)
	if err := mon.Send(&current); err != nil {
		t.Fatal(err)
	}

	if err := mon.Push(ctx, false); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("first push = %v; want the agent's 500", err)
	}
	if err := mon.Push(ctx, false); err != nil { // retried
		t.Fatal(err)
	}
	if got := ag.got(); len(got) != 2 || got[0] != "old,t=1 x=1i 1000000000000" || !strings.HasPrefix(got[1], SelfMeasurement+" ") {
		t.Errorf("agent got %q; want the completed bucket and the failure count", got)
	}
	if err := mon.Push(ctx, false); err != nil {
		t.Fatal(err)
	}
	if ag.posts != 2 {
		t.Errorf("%d posts; want 2: nothing changed, nothing to push", ag.posts)
	}
	// An update to a pushed bucket pushes its new total again.
	if err := mon.Send(&old); err != nil {
		t.Fatal(err)
	}
	if err := mon.Push(ctx, true); err != nil {
		t.Fatal(err)
	}
	got := ag.got()
	if !contains(got, "old,t=1 x=2i 1000000000000") {
		t.Errorf("agent got %q; want the updated total", got)
	}
	if !containsPrefix(got, "current y=1i ") {
		t.Errorf("agent got %q; want the current second on a push of all", got)
	}
	if st := mon.Stats(); st.Pushes != 2 || st.PushFailures != 1 {
		t.Errorf("Stats() = %+v; want 2 pushes, 1 failure", st)
	}
	if err := mustNew(t, Config{}).Push(ctx, true); err == nil {
		t.Error("Push without PushURL succeeded")
	}
}

func TestRunPushesUntilCancelled(t *testing.T) {
	ag := &agent{}
	srv := httptest.NewServer(ag)
	defer srv.Close()
	mon := mustNew(t, Config{Endpoint: "127.0.0.1:0/m", PushURL: srv.URL + "/write", PushInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mon.Run(ctx) }()
	m := NewMetric("done", time.Unix(5, 0))
	m.SetFieldFloat64("v", 0.5)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ag.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cur := NewMetric("last", time.Time{})
	cur.SetFieldInt64("n", 1)
	if err := mon.Send(&cur); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := ag.got()
	if !contains(got, "done v=0.5 5000000000") || !containsPrefix(got, "last n=1i ") {
		t.Errorf("agent got %q; want the periodic push and the final one", got)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func containsPrefix(ss []string, p string) bool {
	for _, x := range ss {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}
