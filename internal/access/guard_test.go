package access

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/cantal-go/cantal/internal/testsupport/certs"
)

// fixture is a web config with TLS, client certificates verified against a cluster CA, and two
// basic-auth users: "reader" (read only) and "writer" (in Guard.Writers).
type fixture struct {
	dir      string
	ca       *certs.CA
	files    certs.Files
	node     certs.Pair // signed by ca: a member's certificate
	foreign  certs.Pair // signed by another CA
	cfgPath  string
	web      *WebConfig
	srv      *httptest.Server
	lastSeen Caller
}

func hash(t testing.TB, pass string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func newFixture(t testing.TB, clientAuth string) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	var err error
	if f.ca, err = certs.NewCA("cluster"); err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	server, _ := f.ca.Issue("server", "127.0.0.1", "localhost")
	f.node, _ = f.ca.Issue("node-b", "127.0.0.1")
	f.foreign, _ = other.Issue("node-x", "127.0.0.1")
	if f.files, err = f.ca.WriteFiles(f.dir, "server", server); err != nil {
		t.Fatal(err)
	}
	f.cfgPath = filepath.Join(f.dir, "web.yml")
	f.writeConfig(t, clientAuth, map[string]string{"reader": "rpass", "writer": "wpass"})
	if f.web, err = LoadWebConfig(f.cfgPath); err != nil {
		t.Fatal(err)
	}
	g := &Guard{Web: f.web, Writers: []string{"writer"}, Need: func(r *http.Request) Role {
		switch {
		case r.URL.Path == "/gossip":
			return Member
		case r.Method == http.MethodPost:
			return Write
		}
		return Read
	}}
	f.srv = httptest.NewUnstartedServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.lastSeen, _ = FromContext(r.Context())
		io.WriteString(w, "data")
	})))
	f.srv.TLS = f.web.ServerTLS()
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) writeConfig(t testing.TB, clientAuth string, users map[string]string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n  client_auth_type: %s\n", clientAuth)
	if len(users) > 0 {
		b.WriteString("basic_auth_users:\n")
		for u, p := range users {
			fmt.Fprintf(&b, "  %s: %s\n", u, hash(t, p))
		}
	}
	if err := os.WriteFile(f.cfgPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// client returns an HTTPS client trusting the cluster CA, presenting cert when given.
func (f *fixture) client(cert *certs.Pair) *http.Client {
	tc := &tls.Config{RootCAs: f.ca.Pool()}
	if cert != nil {
		c, err := cert.TLS()
		if err != nil {
			panic(err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
}

func (f *fixture) do(c *http.Client, method, path, user, pass string) (int, error) {
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(""))
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestGuardRoles(t *testing.T) {
	f := newFixture(t, "VerifyClientCertIfGiven")
	plain := f.client(nil)
	member := f.client(&f.node)
	for _, c := range []struct {
		name         string
		client       *http.Client
		method, path string
		user, pass   string
		want         int
	}{
		{"no credential", plain, "GET", "/api/v1/metrics", "", "", 401},
		{"wrong password", plain, "GET", "/api/v1/metrics", "reader", "nope", 401},
		{"unknown user", plain, "GET", "/api/v1/metrics", "mallory", "rpass", 401},
		{"reader reads", plain, "GET", "/api/v1/metrics", "reader", "rpass", 200},
		{"reader cannot write", plain, "POST", "/write", "reader", "rpass", 403},
		{"reader is no member", plain, "GET", "/gossip", "reader", "rpass", 403},
		{"writer writes", plain, "POST", "/write", "writer", "wpass", 200},
		{"member reads", member, "GET", "/api/v1/metrics", "", "", 200},
		{"member streams", member, "GET", "/gossip", "", "", 200},
		{"member cannot write", member, "POST", "/write", "", "", 403},
	} {
		got, err := f.do(c.client, c.method, c.path, c.user, c.pass)
		if err != nil || got != c.want {
			t.Errorf("%s: %s %s = %d, %v; want %d", c.name, c.method, c.path, got, err, c.want)
		}
	}
	// A certificate from another CA fails the handshake, or is not even offered (Go's client
	// offers only a certificate the server's CA list names): either way no data.
	if got, err := f.do(f.client(&f.foreign), "GET", "/gossip", "", ""); err == nil && got != 401 {
		t.Errorf("a client certificate from a foreign CA: GET /gossip = %d; want a failed handshake or 401", got)
	}
	// Plain HTTP on the TLS port gets no data.
	resp, err := http.Get(strings.Replace(f.srv.URL, "https://", "http://", 1) + "/api/v1/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "data") || resp.StatusCode == 200 {
			t.Errorf("plain HTTP on the TLS port answered %d %q", resp.StatusCode, b)
		}
	}
}

func TestGuardCrossOriginWrite(t *testing.T) {
	f := newFixture(t, "VerifyClientCertIfGiven")
	req, _ := http.NewRequest("POST", f.srv.URL+"/write", strings.NewReader("x v=1"))
	req.SetBasicAuth("writer", "wpass")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := f.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("cross-origin POST with the writer's credentials = %d; want 403", resp.StatusCode)
	}
}

// TestWebConfigReload: users and certificates follow the files without a restart; a broken
// file keeps the last good configuration.
func TestWebConfigReload(t *testing.T) {
	f := newFixture(t, "RequireAndVerifyClientCert")
	clock := time.Now()
	f.web.mu.Lock()
	f.web.now = func() time.Time { return clock }
	f.web.mu.Unlock()
	member := f.client(&f.node)
	if got, _ := f.do(member, "GET", "/x", "newuser", "npass"); got != 200 {
		t.Fatalf("member = %d", got)
	}
	if got, _ := f.do(f.client(&f.node), "GET", "/x", "", ""); got != 200 {
		t.Fatalf("member = %d", got)
	}
	// RequireAndVerifyClientCert: a client without a certificate fails the handshake.
	if _, err := f.do(f.client(nil), "GET", "/x", "reader", "rpass"); err == nil {
		t.Fatal("RequireAndVerifyClientCert let a client without a certificate in")
	}
	// Relax to VerifyClientCertIfGiven and add a user: in force after the next check.
	f.writeConfig(t, "VerifyClientCertIfGiven", map[string]string{"newuser": "npass"})
	os.Chtimes(f.cfgPath, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	clock = clock.Add(2 * time.Second)
	if got, err := f.do(f.client(nil), "GET", "/x", "newuser", "npass"); got != 200 {
		t.Errorf("after reload, newuser = %d, %v; want 200", got, err)
	}
	if got, _ := f.do(f.client(nil), "GET", "/x", "reader", "rpass"); got != 401 {
		t.Errorf("after reload, removed reader = %d; want 401", got)
	}
	// A broken file: the last good configuration stays, the error is reported.
	os.WriteFile(f.cfgPath, []byte("tls_server_config: [\n"), 0o600)
	os.Chtimes(f.cfgPath, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	clock = clock.Add(2 * time.Second)
	if got, _ := f.do(f.client(nil), "GET", "/x", "newuser", "npass"); got != 200 {
		t.Errorf("after a broken edit, newuser = %d; want the last good config (200)", got)
	}
	if f.web.Err() == nil {
		t.Error("Err() = nil after a broken edit")
	}
}

func TestLoadWebConfigRefusesNoAuthentication(t *testing.T) {
	f := newFixture(t, "VerifyClientCertIfGiven")
	p := filepath.Join(f.dir, "open.yml")
	os.WriteFile(p, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"), 0o600)
	if _, err := LoadWebConfig(p); err == nil || !strings.Contains(err.Error(), "no way to authenticate") {
		t.Errorf("TLS without users or client CA: err = %v; want no way to authenticate", err)
	}
	os.WriteFile(p, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbogus: 1\n"), 0o600)
	if _, err := LoadWebConfig(p); err == nil {
		t.Error("an unknown key was accepted (exporter-toolkit reads strictly)")
	}
}

func TestAnonymousWithoutWebConfig(t *testing.T) {
	g := &Guard{PrivateProcesses: true}
	for _, c := range []struct {
		remote    string
		wantWrite bool
	}{{"127.0.0.1:5555", true}, {"[::1]:5555", true}, {"10.1.2.3:5555", false}} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		caller, ok := g.identify(r)
		if !ok || caller.Has(Write) != c.wantWrite || !caller.Has(Read|Member) || caller.Processes != ProcessesNone {
			t.Errorf("anonymous from %s = %+v; want read, member, write %v, no processes", c.remote, caller, c.wantWrite)
		}
	}
}

// TestCertificateWithoutMembership: in a cluster, a certificate of the cluster CA alone opens
// the gossip stream (whose own encryption then decides) and reads nothing; a live member reads.
func TestCertificateWithoutMembership(t *testing.T) {
	f := newFixture(t, "VerifyClientCertIfGiven")
	member := false
	g := &Guard{Web: f.web, Readers: []string{"prometheus"}, IsMember: func(*http.Request) bool { return member }, Need: func(r *http.Request) Role {
		if r.URL.Path == "/gossip" {
			return Member
		}
		return Read
	}}
	srv := httptest.NewUnstartedServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	srv.TLS = f.web.ServerTLS()
	srv.StartTLS()
	defer srv.Close()
	f.srv = srv
	c := f.client(&f.node)
	for _, x := range []struct {
		member bool
		path   string
		want   int
	}{{false, "/gossip", 200}, {false, "/api/v1/metrics", 403}, {true, "/api/v1/metrics", 200}} {
		member = x.member
		if got, err := f.do(c, "GET", x.path, "", ""); got != x.want {
			t.Errorf("certificate, member %v: GET %s = %d, %v; want %d", x.member, x.path, got, err, x.want)
		}
	}
	// A certificate named in Readers reads from anywhere.
	member = false
	prom, _ := f.ca.Issue("prometheus")
	if got, err := f.do(f.client(&prom), "GET", "/api/v1/metrics", "", ""); got != 200 {
		t.Errorf("a reader's certificate from a non-member address: %d, %v; want 200", got, err)
	}
}

// TestDNSRebindingRefused: without a web config, a request to a loopback listener naming a host
// other than localhost or an IP address is refused; the same names pass on other addresses.
func TestDNSRebindingRefused(t *testing.T) {
	g := &Guard{LocalNames: []string{"myhost"}}
	h := g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, c := range []struct {
		local, host string
		want        int
	}{
		{"127.0.0.1:22682", "127.0.0.1:22682", 200},
		{"127.0.0.1:22682", "localhost:22682", 200},
		{"[::1]:22682", "[::1]:22682", 200},
		{"127.0.0.1:22682", "evil.example:22682", 403},
		{"127.0.0.1:22682", "evil.example", 403},
		{"10.0.0.1:22682", "node1.example:22682", 200},
		{"127.0.1.1:22682", "MyHost:22682", 200}, // Debian maps the host name to 127.0.1.1
	} {
		la, _ := net.ResolveTCPAddr("tcp", c.local)
		r := httptest.NewRequest("GET", "/api/v1/metrics", nil)
		r.Host = c.host
		r.RemoteAddr = "127.0.0.1:5000"
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, la))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("Host %s on %s = %d; want %d", c.host, c.local, w.Code, c.want)
		}
	}
}
