package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
)

func TestChosenIsTheLowestAliveID(t *testing.T) {
	alive := []string{"b2", "c3"}
	if !Chosen("a1", alive) {
		t.Error("a1 with alive b2, c3: not chosen; want the lowest id chosen")
	}
	if Chosen("b2", []string{"a1", "c3"}) || Chosen("c3", []string{"a1", "b2"}) {
		t.Error("a member above the lowest alive id chose itself")
	}
	// a1 died: the others no longer list it alive, and b2 takes over (c3 does not).
	if !Chosen("b2", []string{"c3"}) || Chosen("c3", []string{"b2"}) {
		t.Error("after a1 died: want b2 chosen, c3 not")
	}
	if !Chosen("", []string{"a"}) || !Chosen("z", nil) {
		t.Error("no cluster, or alone: want chosen")
	}
}

func al(name string, kv ...string) labels.Labels {
	return labels.FromStrings(append([]string{"alertname", name}, kv...)...)
}

// TestTrackerSendsAsPrometheusRulesDo: sent at once when firing, not again before the resend
// delay, again after it with EndsAt moved on; resolved sent at once with EndsAt = the
// resolution, repeated every resend delay, dropped after ResolvedRetention; firing again is a
// new alert.
func TestTrackerSendsAsPrometheusRulesDo(t *testing.T) {
	tr := &Tracker{ResendDelay: time.Minute, Interval: 2 * time.Second}
	t0 := time.Unix(1_000_000, 0)
	f := Firing{Labels: al("cpu_busy", "node", "a"), FiredAt: t0.Add(-time.Minute)}
	out := tr.Update(t0, []Firing{f})
	if len(out) != 1 || !out[0].StartsAt.Equal(f.FiredAt) || !out[0].EndsAt.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("first update: %v; want one alert, StartsAt its firing, EndsAt 4 resend delays ahead", out)
	}
	if out := tr.Update(t0.Add(30*time.Second), []Firing{f}); len(out) != 0 {
		t.Fatalf("30 s later: sent %v again before the resend delay", out)
	}
	out = tr.Update(t0.Add(61*time.Second), []Firing{f})
	if len(out) != 1 || !out[0].EndsAt.Equal(t0.Add(61*time.Second+4*time.Minute)) {
		t.Fatalf("after the resend delay: %v; want it resent with EndsAt moved on", out)
	}
	tres := t0.Add(70 * time.Second)
	out = tr.Update(tres, nil)
	if len(out) != 1 || !out[0].EndsAt.Equal(tres) || !out[0].ResolvedAt(tres) {
		t.Fatalf("resolution: %v; want it sent at once with EndsAt = the resolution", out)
	}
	if out := tr.Update(tres.Add(10*time.Second), nil); len(out) != 0 {
		t.Fatalf("resolved: resent %v before the resend delay", out)
	}
	if out := tr.Update(tres.Add(2*time.Minute), nil); len(out) != 1 || !out[0].EndsAt.Equal(tres) {
		t.Fatalf("resolved, a resend delay later: %v; want the resolution again", out)
	}
	if out := tr.Update(tres.Add(ResolvedRetention+time.Minute), nil); len(out) != 0 || tr.Active() != 0 {
		t.Fatalf("after ResolvedRetention: sent %v, holds %d; want it forgotten", out, tr.Active())
	}
	// Firing again after a resolution is a new alert with its own start.
	tr.Update(tres.Add(time.Second), []Firing{f})
	f2 := f
	f2.FiredAt = tres.Add(2 * time.Second)
	tr2 := &Tracker{}
	tr2.Update(t0, []Firing{f})
	tr2.Update(t0.Add(time.Second), nil)
	out = tr2.Update(t0.Add(2*time.Second), []Firing{f2})
	if len(out) != 1 || out[0].ResolvedAt(t0.Add(2*time.Second)) || !out[0].StartsAt.Equal(f2.FiredAt) {
		t.Fatalf("firing again after a resolution: %v; want a new firing alert at once", out)
	}
}

// TestTrackerForgetSendsNoResolution: a cluster alert handed to another sender is dropped
// without a resolution, which would resolve the other sender's alert at the Alertmanager.
func TestTrackerForgetSendsNoResolution(t *testing.T) {
	tr := &Tracker{}
	t0 := time.Unix(1_000_000, 0)
	down := Firing{Labels: al("node_down", "peer", "c"), FiredAt: t0}
	cpu := Firing{Labels: al("cpu_busy", "node", "a"), FiredAt: t0}
	tr.Update(t0, []Firing{down, cpu})
	tr.Forget(func(l labels.Labels) bool { return l.Get("alertname") != "node_down" })
	out := tr.Update(t0.Add(time.Second), []Firing{cpu})
	if len(out) != 0 || tr.Active() != 1 {
		t.Fatalf("after Forget: sent %v, holds %d; want nothing sent and cpu_busy held", out, tr.Active())
	}
}

func TestBoundCutsAnnotationsThenDrops(t *testing.T) {
	small := &notifier.Alert{Labels: al("x"), Annotations: labels.FromStrings("summary", "s")}
	if b, ok := bound(small); !ok || b != small {
		t.Fatal("a small alert was changed")
	}
	big := &notifier.Alert{Labels: al("x", "node", "a"),
		Annotations: labels.FromStrings("description", strings.Repeat("é", MaxAlertBytes), "summary", "short")}
	b, ok := bound(big)
	if !ok {
		t.Fatal("an alert with huge annotations was dropped; want them cut")
	}
	n := 0
	for _, ls := range []labels.Labels{b.Labels, b.Annotations} {
		ls.Range(func(l labels.Label) { n += len(l.Name) + len(l.Value) })
	}
	if n > MaxAlertBytes || b.Annotations.Get("summary") != "short" || !strings.HasSuffix(b.Annotations.Get("description"), "…") {
		t.Fatalf("cut alert: %d bytes, summary %q; want ≤ %d, the short one kept, the long one cut with …", n, b.Annotations.Get("summary"), MaxAlertBytes)
	}
	if big.Annotations.Get("summary") != "short" || len(big.Annotations.Get("description")) != 2*MaxAlertBytes {
		t.Fatal("bound changed the caller's alert")
	}
	huge := &notifier.Alert{Labels: al("x", "v", strings.Repeat("x", MaxAlertBytes))}
	if _, ok := bound(huge); ok {
		t.Fatal("an alert whose labels exceed MaxAlertBytes was kept")
	}
}

func TestFromURLCredentialsBecomeBasicAuth(t *testing.T) {
	c, err := FromURL("http://u:secret@am.example:9093/prefix")
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "http://am.example:9093/prefix" || c.HTTPClientConfig.BasicAuth == nil ||
		c.HTTPClientConfig.BasicAuth.Username != "u" || string(c.HTTPClientConfig.BasicAuth.Password) != "secret" {
		t.Fatalf("got url %q auth %+v; want the credential moved to basic auth", c.URL, c.HTTPClientConfig.BasicAuth)
	}
	for _, bad := range []string{"am:9093", "ftp://am", "http://", "http://am/?x=1", "%zz"} {
		if _, err := FromURL(bad); err == nil {
			t.Errorf("FromURL(%q): no error", bad)
		}
	}
	if _, _, err := Targets([]string{"http://a:1", "http://a:1/"}, ""); err == nil {
		t.Error("the same Alertmanager twice: no error")
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	f, err := ParseFile([]byte(`queue_capacity: 50
alertmanagers:
  - url: https://am:9093
    timeout: 3s
    basic_auth: {username: u, password_file: pw}
    tls_config: {insecure_skip_verify: true}
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Alertmanagers[0]
	if f.QueueCapacity != 50 || time.Duration(a.Timeout) != 3*time.Second || a.HTTPClientConfig.BasicAuth.PasswordFile != filepath.Join(dir, "pw") ||
		!a.HTTPClientConfig.TLSConfig.InsecureSkipVerify || !a.HTTPClientConfig.FollowRedirects {
		t.Fatalf("parsed %+v", f)
	}
	for name, bad := range map[string]string{
		"unknown key":      "alertmanagers: [{url: 'http://a', nope: 1}]",
		"no list":          "queue_capacity: 5",
		"capacity":         "queue_capacity: 1000000\nalertmanagers: []",
		"bad url":          "alertmanagers: [{url: 'a:b'}]",
		"negative timeout": "alertmanagers: [{url: 'http://a', timeout: -1s}]",
		"two auths":        "alertmanagers: [{url: 'http://u:p@a', basic_auth: {username: x}}]",
	} {
		if _, err := ParseFile([]byte(bad), dir); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// The file's secrets are not quoted in errors.
	_, err = ParseFile([]byte("alertmanagers: [{url: 'http://a', basic_auth: {username: u, password: hunter2, password_file: x}}]"), dir)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("password and password_file both: err %v; want an error without the password", err)
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte("alertmanagers: [{url: 'http://a:9093'}]"))
	f.Add([]byte("queue_capacity: 5\nalertmanagers:\n  - url: https://u:p@am/x\n    timeout: 2s\n    tls_config: {ca_file: c}\n"))
	f.Add([]byte("alertmanagers: [{url: '%zz'}]"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseFile(b, "/d")
		if err != nil {
			return
		}
		for _, a := range file.Alertmanagers {
			if a.Timeout <= 0 || strings.Contains(a.URL, "@") && a.HTTPClientConfig.BasicAuth == nil {
				t.Fatalf("accepted %+v", a)
			}
		}
	})
}

// fakeAM is an Alertmanager's POST /api/v2/alerts that records what it got; block, when set,
// holds every request until closed.
type fakeAM struct {
	mu     sync.Mutex
	got    []map[string]any
	auth   []string
	block  chan struct{}
	posted chan struct{}
}

func (f *fakeAM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != "POST" || r.URL.Path != "/pre/api/v2/alerts" {
		http.Error(w, "not found", 404)
		return
	}
	if f.block != nil {
		select {
		case f.posted <- struct{}{}:
		default:
		}
		<-f.block
	}
	b, _ := io.ReadAll(r.Body)
	var as []map[string]any
	if err := json.Unmarshal(b, &as); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	u, p, _ := r.BasicAuth()
	f.mu.Lock()
	f.got = append(f.got, as...)
	f.auth = append(f.auth, u+":"+p)
	f.mu.Unlock()
}

func (f *fakeAM) alerts() ([]map[string]any, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.got...), append([]string(nil), f.auth...)
}

func waitFor(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSenderPostsV2WithBasicAuth: an alert sent reaches POST <prefix>/api/v2/alerts as
// Alertmanager's v2 JSON, with the URL's credential as basic auth.
func TestSenderPostsV2WithBasicAuth(t *testing.T) {
	am := &fakeAM{}
	srv := httptest.NewServer(am)
	defer srv.Close()
	s := New(10, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	c, err := FromURL(strings.Replace(srv.URL, "http://", "http://user:pw@", 1) + "/pre")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]TargetConfig{c}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	waitFor(t, 10*time.Second, func() error {
		// Send until the send loop exists (Run applies the targets asynchronously).
		s.Send(&notifier.Alert{Labels: al("x", "node", "a"), Annotations: labels.FromStrings("summary", "s"), StartsAt: now, EndsAt: now.Add(time.Hour)})
		if got, _ := am.alerts(); len(got) == 0 {
			return fmt.Errorf("nothing posted")
		}
		if per, _ := s.Status(); len(per) != 1 || per[0].Sent < 1 {
			return fmt.Errorf("status %+v: nothing counted sent", per)
		}
		return nil
	})
	got, auth := am.alerts()
	l, _ := got[0]["labels"].(map[string]any)
	if l["alertname"] != "x" || l["node"] != "a" || got[0]["startsAt"] == nil || got[0]["endsAt"] == nil || auth[0] != "user:pw" {
		t.Fatalf("posted %v with auth %q; want the v2 alert with basic auth user:pw", got[0], auth[0])
	}
	per, _ := s.Status()
	if strings.Contains(per[0].URL, "pw") {
		t.Fatalf("status %+v; want one Alertmanager with sent ≥ 1 and no credential in its URL", per)
	}
}

// TestSenderQueueIsBounded: with the Alertmanager hanging, Send never waits, the queue holds
// at most its capacity, and the alerts beyond it are counted as dropped.
func TestSenderQueueIsBounded(t *testing.T) {
	am := &fakeAM{block: make(chan struct{}), posted: make(chan struct{}, 1)}
	srv := httptest.NewServer(am)
	defer srv.Close()
	defer close(am.block)
	const capacity = 20
	s := New(capacity, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	c, _ := FromURL(srv.URL + "/pre")
	if err := s.Apply([]TargetConfig{c}); err != nil {
		t.Fatal(err)
	}
	// One alert until the send loop has taken a batch and hangs in its request.
	waitFor(t, 10*time.Second, func() error {
		s.Send(&notifier.Alert{Labels: al("first")})
		select {
		case <-am.posted:
			return nil
		default:
			return fmt.Errorf("no request yet")
		}
	})
	start := time.Now()
	for i := range 500 {
		s.Send(&notifier.Alert{Labels: al("x", "i", fmt.Sprint(i))})
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("500 Sends took %s with the Alertmanager hanging; Send must not wait", d)
	}
	per, _ := s.Status()
	if len(per) != 1 || per[0].Queue > capacity || per[0].Dropped < 500-capacity {
		t.Fatalf("status %+v; want queue ≤ %d and ≥ %d dropped", per, capacity, 500-capacity)
	}
}

func TestTargetsFromFileAndURLs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "am.yaml")
	os.WriteFile(p, []byte("queue_capacity: 7\nalertmanagers: [{url: 'https://b:9093'}]\n"), 0o600)
	ts, capacity, err := Targets([]string{"http://a:9093"}, p)
	if err != nil || len(ts) != 2 || capacity != 7 || ts[1].URL != "https://b:9093" {
		t.Fatalf("Targets: %+v cap %d err %v", ts, capacity, err)
	}
}

// TestSenderApplyNewPassword: a reload that changes only an Alertmanager's password (which
// Prometheus's notifier hashes as "<secret>", so it would keep the old client) sends with the
// new one.
func TestSenderApplyNewPassword(t *testing.T) {
	am := &fakeAM{}
	srv := httptest.NewServer(am)
	defer srv.Close()
	s := New(10, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for _, pw := range []string{"first", "second"} {
		c, err := FromURL(strings.Replace(srv.URL, "http://", "http://user:"+pw+"@", 1) + "/pre")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply([]TargetConfig{c}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() error {
			s.Send(&notifier.Alert{Labels: al("x")})
			_, auth := am.alerts()
			if len(auth) == 0 || auth[len(auth)-1] != "user:"+pw {
				return fmt.Errorf("%d posts, the last with %v; want user:%s", len(auth), auth[max(0, len(auth)-1):], pw)
			}
			return nil
		})
	}
}
