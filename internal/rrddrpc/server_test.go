package rrddrpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testServer is a Server serving on a socket in a temporary directory.
type testServer struct {
	*Server
	t      *testing.T
	client *http.Client
}

func startServer(t *testing.T, opt Options) *testServer {
	t.Helper()
	if opt.Dir == "" {
		opt.Dir = filepath.Join(t.TempDir(), "metrics")
	}
	if opt.NextReading == nil {
		opt.NextReading = func() time.Duration { return 1234567 * time.Microsecond }
	}
	s, err := Listen(filepath.Join(t.TempDir(), "xcp-rrdd"), opt)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v after Close; want nil", err)
		}
	})
	return &testServer{Server: s, t: t, client: unixClient(s.Path())}
}

func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}}
}

// post sends body as rrdd.py does (POST / with the host of its URI) and returns the answer.
func (ts *testServer) post(method, body string) (int, string, error) {
	req, err := http.NewRequest(method, "http://_var_xapi_xcp-rrdd/", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "text/xml")
	resp, err := ts.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// call makes one call and returns whether it succeeded and its Value or ErrorDescription.
func (ts *testServer) call(method string, params ...any) (bool, any) {
	ts.t.Helper()
	code, body, err := ts.post("POST", string(appendCall(nil, &Call{Method: method, Params: params})))
	if err != nil {
		ts.t.Fatalf("%s: %v", method, err)
	}
	if code != http.StatusOK {
		ts.t.Fatalf("%s: HTTP %d %s", method, code, body)
	}
	ok, v, err := parseResponse([]byte(body))
	if err != nil {
		ts.t.Fatalf("%s: answer %s: %v", method, body, err)
	}
	return ok, v
}

func (ts *testServer) mustCall(method string, params ...any) any {
	ts.t.Helper()
	ok, v := ts.call(method, params...)
	if !ok {
		ts.t.Fatalf("%s(%#v) failed: %#v", method, params, v)
	}
	return v
}

func uid(u string) map[string]any { return map[string]any{"uid": u} }

func TestListenMakesSocketAndDir(t *testing.T) {
	old := syscall.Umask(0o077) // the modes must not depend on the umask
	dir := filepath.Join(t.TempDir(), "shm", "metrics")
	ts := startServer(t, Options{Dir: dir})
	syscall.Umask(old)

	fi, err := os.Lstat(ts.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v; want a socket, 0600", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) {
		t.Errorf("socket owner = %d; want %d", st.Uid, os.Geteuid())
	}
	fi, err = os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("plugin directory mode = %v; want a directory, 0755", fi.Mode())
	}
	if ts.Dir() != dir {
		t.Errorf("Dir() = %q; want %q", ts.Dir(), dir)
	}
}

func TestListenSocketInTheWay(t *testing.T) {
	opt := Options{Dir: t.TempDir()}
	path := filepath.Join(t.TempDir(), "xcp-rrdd")

	// A stale socket, left by a server that died, is replaced.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	s, err := Listen(path, opt)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	s.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, the socket is still there: %v", err)
	}

	// A live socket (xcp-rrdd's) is not.
	live, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if s, err := Listen(path, opt); err == nil {
		s.Close()
		t.Errorf("Listen over a live socket succeeded")
	}
	live.Close()

	// Nor is a file of another kind.
	for _, make := range []func() error{
		func() error { return os.WriteFile(path, []byte("keep"), 0o644) },
		func() error { return os.Symlink(filepath.Join(t.TempDir(), "gone"), path) },
		func() error { return os.Mkdir(path, 0o755) },
	} {
		os.Remove(path)
		if err := make(); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Lstat(path)
		if s, err := Listen(path, opt); err == nil {
			s.Close()
			t.Errorf("Listen over a %v succeeded", before.Mode())
		}
		if after, err := os.Lstat(path); err != nil || after.Mode() != before.Mode() {
			t.Errorf("Listen changed the %v in its way: %v, %v", before.Mode(), after, err)
		}
	}
}

func TestListenRefusesOpenSocketDir(t *testing.T) {
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if s, err := Listen(filepath.Join(open, "xcp-rrdd"), Options{Dir: t.TempDir()}); err == nil {
		s.Close()
		t.Errorf("Listen in a directory all may write to (not sticky) succeeded")
	}
	// Sticky, like /tmp: nobody else can remove or rename the agent's socket.
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	s, err := Listen(filepath.Join(open, "xcp-rrdd"), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("Listen in a sticky directory: %v", err)
	}
	s.Close()
}

func TestListenRefusesUntrustedPluginDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if s, err := Listen(filepath.Join(t.TempDir(), "sock"), Options{Dir: dir}); err == nil {
		s.Close()
		t.Errorf("Listen with a plugin directory all may write to succeeded")
	}
	if s, err := Listen(filepath.Join(t.TempDir(), "sock"), Options{}); err == nil {
		s.Close()
		t.Errorf("Listen without a plugin directory succeeded")
	}
}

// TestPythonSession: the calls rrdd.py makes, in its order, as it marshals them.
func TestPythonSession(t *testing.T) {
	ts := startServer(t, Options{})
	if got := ts.mustCall("Plugin.get_header", nil); got != "DATASOURCES\n" {
		t.Errorf("get_header = %#v; want %q", got, "DATASOURCES\n")
	}
	want := filepath.Join(ts.Dir(), "xcp-rrdd-test")
	if got := ts.mustCall("Plugin.get_path", uid("xcp-rrdd-test")); got != want {
		t.Errorf("get_path = %#v; want %q", got, want)
	}
	if got := ts.mustCall("Plugin.next_reading", uid("xcp-rrdd-test")); got != -1.0 {
		t.Errorf("next_reading before register = %#v; want -1", got)
	}
	reg := map[string]any{"uid": "xcp-rrdd-test", "frequency": "Five_Seconds"}
	for range 2 { // rrdd.py registers before every reading
		if got := ts.mustCall("Plugin.register", reg); got != 1.235 {
			t.Errorf("register = %#v; want 1.235 (NextReading, rounded up to the ms)", got)
		}
	}
	ps := ts.Plugins()
	if len(ps) != 1 || ps[0].UID != "xcp-rrdd-test" || ps[0].Protocol != "V1" || ps[0].Frequency != "Five_Seconds" {
		t.Errorf("Plugins() = %+v; want xcp-rrdd-test registered with V1 (Plugin.register)", ps)
	}
	if got := ts.mustCall("Plugin.next_reading", uid("xcp-rrdd-test")); got != 1.235 {
		t.Errorf("next_reading = %#v; want 1.235", got)
	}
	if got := ts.mustCall("Plugin.deregister", uid("xcp-rrdd-test")); got != nil {
		t.Errorf("deregister = %#v; want nil", got)
	}
	if got := ts.mustCall("Plugin.next_reading", uid("xcp-rrdd-test")); got != -1.0 {
		t.Errorf("next_reading after deregister = %#v; want -1", got)
	}
	if ps := ts.Plugins(); len(ps) != 0 {
		t.Errorf("Plugins() after deregister = %+v", ps)
	}
	if st := ts.Stats(); st.Calls != 8 || st.Failures != 0 || st.Registrations != 1 {
		t.Errorf("Stats() = %+v; want 8 calls, no failure, 1 registration", st)
	}
}

// TestOCamlSession: the calls of XAPI's OCaml plugin library (rrdd-plugin's reporter).
func TestOCamlSession(t *testing.T) {
	ts := startServer(t, Options{})
	if got := ts.mustCall("Plugin.get_path", uid("xcp-rrdd-iostat")); got != filepath.Join(ts.Dir(), "xcp-rrdd-iostat") {
		t.Errorf("get_path = %#v", got)
	}
	args := map[string]any{"uid": "xcp-rrdd-iostat", "info": "Five_Seconds", "protocol": "V2"}
	if got := ts.mustCall("Plugin.Local.register", args); got != 1.235 {
		t.Errorf("Local.register = %#v; want 1.235", got)
	}
	// Older rpclib marshals a constant constructor as a one-element array; protocol defaults to V2.
	if got := ts.mustCall("Plugin.Local.register", map[string]any{"uid": "old", "info": []any{"five_seconds"}}); got != 1.235 {
		t.Errorf("Local.register without protocol = %#v; want 1.235", got)
	}
	if got := ts.mustCall("Plugin.Local.register", "positional", "Five_Seconds", []any{"v1"}); got != 1.235 {
		t.Errorf("Local.register with positional params = %#v; want 1.235", got)
	}
	want := []Plugin{{UID: "old", Protocol: "V2"}, {UID: "positional", Protocol: "V1"}, {UID: "xcp-rrdd-iostat", Protocol: "V2"}}
	got := ts.Plugins()
	for i := range got {
		got[i].Since, got[i].Frequency = time.Time{}, ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Plugins() = %+v; want %+v", got, want)
	}
	if got := ts.mustCall("Plugin.Local.next_reading", uid("xcp-rrdd-iostat")); got != 1.235 {
		t.Errorf("Local.next_reading = %#v; want 1.235", got)
	}
	ts.mustCall("Plugin.Local.deregister", uid("xcp-rrdd-iostat"))
	ts.mustCall("Plugin.Local.deregister", uid("never-registered"))
	if got := ts.mustCall("Plugin.Local.next_reading", uid("xcp-rrdd-iostat")); got != -1.0 {
		t.Errorf("Local.next_reading after deregister = %#v; want -1", got)
	}
}

func TestFailures(t *testing.T) {
	ts := startServer(t, Options{})
	for _, tc := range []struct {
		method string
		params []any
		tag    string
	}{
		{"Plugin.register", []any{map[string]any{"uid": "p", "frequency": "One_Minute"}}, "Rrdd_internal_error"},
		{"Plugin.register", []any{uid("p")}, "Rrdd_internal_error"},
		{"Plugin.Local.register", []any{map[string]any{"uid": "p", "info": "Five_Seconds", "protocol": "V3"}}, "Invalid_protocol"},
		{"Plugin.get_path", nil, "Rrdd_internal_error"},
		{"Plugin.get_path", []any{map[string]any{"uid": int64(1)}}, "Rrdd_internal_error"},
		{"Plugin.get_path", []any{map[string]any{"name": "p"}}, "Rrdd_internal_error"},
		{"Plugin.Interdomain.register", []any{map[string]any{"uid": map[string]any{"name": "p", "frontend_domid": int64(1)}}}, "Rrdd_internal_error"},
		{"query_host_ds", []any{map[string]any{"ds_name": "cpu0"}}, "Rrdd_internal_error"},
		{"system.listMethods", nil, "Rrdd_internal_error"},
	} {
		ok, v := ts.call(tc.method, tc.params...)
		desc, isList := v.([]any)
		if ok || !isList || len(desc) != 2 || desc[0] != tc.tag {
			t.Errorf("%s(%#v) = %v, %#v; want a Failure [%s, message]", tc.method, tc.params, ok, v, tc.tag)
		}
	}
	if ps := ts.Plugins(); len(ps) != 0 {
		t.Errorf("failed registrations registered %+v", ps)
	}
}

func TestBadUIDs(t *testing.T) {
	ts := startServer(t, Options{})
	for _, u := range []string{
		"", "/etc/passwd", "a/b", "..", "../x", "a..b", ".hidden", ".", "nul\x00byte", "new\nline",
		"tab\tbed", "del\x7f", strings.Repeat("u", MaxUID+1), "\u0085",
	} {
		if err := CheckUID(u); err == nil {
			t.Errorf("CheckUID(%q) = nil; want an error", u)
		} else if len(u) > 3 && strings.Contains(err.Error(), u) {
			t.Errorf("CheckUID(%q) = %v: repeats the uid", u, err)
		}
		if strings.ContainsRune(u, 0) {
			continue // XML cannot carry NUL (ParseCall refuses &#0;)
		}
		for _, m := range []string{"Plugin.get_path", "Plugin.register", "Plugin.Local.register", "Plugin.next_reading", "Plugin.deregister"} {
			args := map[string]any{"uid": u, "frequency": "Five_Seconds", "info": "Five_Seconds"}
			if ok, v := ts.call(m, args); ok {
				t.Errorf("%s(uid %q) = %#v; want a Failure", m, u, v)
			}
		}
	}
	for _, u := range []string{"xcp-rrdd-iostat", "a.b", "plugin_1", strings.Repeat("u", MaxUID), "démon"} {
		if err := CheckUID(u); err != nil {
			t.Errorf("CheckUID(%q) = %v; want nil", u, err)
		}
	}
	entries, err := os.ReadDir(ts.Dir())
	if err != nil || len(entries) != 0 {
		t.Errorf("plugin directory holds %v, %v; want nothing", entries, err)
	}
	if ps := ts.Plugins(); len(ps) != 0 {
		t.Errorf("bad uids registered: %+v", ps)
	}
}

func TestMaxPlugins(t *testing.T) {
	ts := startServer(t, Options{MaxPlugins: 2})
	reg := func(u string) bool {
		ok, _ := ts.call("Plugin.register", map[string]any{"uid": u, "frequency": "Five_Seconds"})
		return ok
	}
	if !reg("a") || !reg("b") || !reg("a") {
		t.Fatal("registering two plugins failed")
	}
	if reg("c") {
		t.Errorf("a third plugin registered past MaxPlugins 2")
	}
	ts.mustCall("Plugin.deregister", uid("a"))
	if !reg("c") {
		t.Errorf("no room after a deregistration")
	}
}

// TestGetPathDir: get_path remakes a directory removed since Listen, and refuses one others
// may write to.
func TestGetPathDir(t *testing.T) {
	ts := startServer(t, Options{})
	if err := os.Remove(ts.Dir()); err != nil {
		t.Fatal(err)
	}
	ts.mustCall("Plugin.get_path", uid("p"))
	if fi, err := os.Stat(ts.Dir()); err != nil || !fi.IsDir() {
		t.Fatalf("get_path did not remake the directory: %v", err)
	}
	if err := os.Chmod(ts.Dir(), 0o777); err != nil {
		t.Fatal(err)
	}
	if ok, v := ts.call("Plugin.get_path", uid("p")); ok {
		t.Errorf("get_path in a directory all may write to = %#v; want a Failure", v)
	}
	os.Chmod(ts.Dir(), 0o755)
	ts.mustCall("Plugin.get_path", uid("p"))

	// A symlink where the directory was is followed only if root put it there (it did here)
	// and leads to a trusted directory.
	os.Remove(ts.Dir())
	open := t.TempDir()
	os.Chmod(open, 0o777)
	if err := os.Symlink(open, ts.Dir()); err != nil {
		t.Fatal(err)
	}
	if ok, v := ts.call("Plugin.get_path", uid("p")); ok {
		t.Errorf("get_path through a symlink to an open directory = %#v; want a Failure", v)
	}
}

func TestHTTPRefusals(t *testing.T) {
	ts := startServer(t, Options{MaxRequestBytes: 1024})
	if code, _, err := ts.post("GET", ""); err != nil || code != http.StatusMethodNotAllowed {
		t.Errorf("GET = %d, %v; want 405", code, err)
	}
	big := param(`<value>` + strings.Repeat("x", 2000) + `</value>`)
	if code, _, err := ts.post("POST", big); err != nil || code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of %d bytes = %d, %v; want 413", len(big), code, err)
	}
	code, body, err := ts.post("POST", param(`<value>SECRET<int>1</int></value>`))
	if err != nil || code != http.StatusBadRequest || strings.Contains(body, "SECRET") {
		t.Errorf("malformed call = %d %q, %v; want 400 quoting nothing", code, body, err)
	}
	if st := ts.Stats(); st.BadRequests != 3 || st.Calls != 0 {
		t.Errorf("Stats() = %+v; want 3 bad requests, no call", st)
	}
	// Requests are still answered.
	ts.mustCall("Plugin.get_header", nil)
}

func TestPeerRefused(t *testing.T) {
	ts := startServer(t, Options{AllowUID: func(uid uint32) bool { return uid == 12345 }})
	if code, body, err := ts.post("POST", pyGetHeader); err == nil {
		t.Errorf("a refused peer got an answer: %d %q", code, body)
	}
	if st := ts.Stats(); st.RefusedPeers != 1 || st.Calls != 0 {
		t.Errorf("Stats() = %+v; want 1 refused peer, no call", st)
	}
}

// TestSilentClientClosed: a connection that sends nothing is closed by the server's deadline.
func TestSilentClientClosed(t *testing.T) {
	ts := startServer(t, Options{Timeout: 50 * time.Millisecond})
	c, err := net.Dial("unix", ts.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a guard against hanging, not the assertion
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err != io.EOF {
		t.Errorf("Read on a silent connection = %d, %v; want 0, EOF (closed by the server)", n, err)
	}
}

// TestMaxConns: at the limit, a new connection takes the place of an idle one.
func TestMaxConns(t *testing.T) {
	ts := startServer(t, Options{MaxConns: 1})
	idle, err := net.Dial("unix", ts.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	ts.mustCall("Plugin.get_header", nil)
	idle.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the idle connection = %d, %v; want closed to make room", n, err)
	}
	if st := ts.ln.Stats(); st.Evicted != 1 {
		t.Errorf("connlimit stats = %+v; want 1 evicted", st)
	}
}

func TestCloseBeforeServe(t *testing.T) {
	s, err := Listen(filepath.Join(t.TempDir(), "sock"), Options{Dir: t.TempDir(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	s.Close()
	if err := s.Serve(); err != nil {
		t.Errorf("Serve after Close = %v; want nil", err)
	}
	if _, err := os.Lstat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after Close: %v", err)
	}
}

// TestNextReadingRoundsUp: a reading due in less than a millisecond is not answered as 0 (the
// libraries sleep for what they are told, less their margin).
func TestNextReadingRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{{100 * time.Microsecond, 0.001}, {time.Second, 1}, {1999*time.Millisecond + 1, 2}} {
		ts := startServer(t, Options{NextReading: func() time.Duration { return tc.d }})
		reg := map[string]any{"uid": "p", "frequency": "Five_Seconds"}
		if got := ts.mustCall("Plugin.register", reg); got != tc.want {
			t.Errorf("register with the next reading in %v = %#v; want %v", tc.d, got, tc.want)
		}
	}
}
