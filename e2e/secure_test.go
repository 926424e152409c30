package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/bcrypt"

	"github.com/cantal-go/cantal/internal/testsupport/certs"
)

// secureSetup is a web config for one agent on 127.0.0.1: a CA, the agent's certificate, a
// member certificate for clients, and the users reader/rpass and writer/wpass.
type secureSetup struct {
	dir    string
	ca     *certs.CA
	files  certs.Files
	member certs.Pair
	config string
}

func newSecureSetup(t *testing.T, clientAuth string) *secureSetup {
	t.Helper()
	s := &secureSetup{dir: t.TempDir()}
	var err error
	if s.ca, err = certs.NewCA("cantal test CA"); err != nil {
		t.Fatal(err)
	}
	node, err := s.ca.Issue("node-a", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if s.member, err = s.ca.Issue("node-b", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if s.files, err = s.ca.WriteFiles(s.dir, "node", node); err != nil {
		t.Fatal(err)
	}
	hash := func(p string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	s.config = filepath.Join(s.dir, "web.yml")
	cfg := fmt.Sprintf(`tls_server_config:
  cert_file: %s
  key_file: %s
  client_ca_file: %s
  client_auth_type: %s
basic_auth_users:
  reader: %s
  writer: %s
`, s.files.Cert, s.files.Key, s.files.CA, clientAuth, hash("rpass"), hash("wpass"))
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// client is an HTTPS client that trusts the test CA, with the member certificate when cert.
func (s *secureSetup) client(cert bool) *http.Client {
	tc := &tls.Config{RootCAs: s.ca.Pool()}
	if cert {
		c, err := s.member.TLS()
		if err != nil {
			panic(err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 15 * time.Second}
}

// startSecureAgent starts an agent with the web config (reader reads, writer writes) and
// waits for its first scan, asking as reader.
func startSecureAgent(t *testing.T, s *secureSetup, args ...string) *agent {
	t.Helper()
	a := &agent{t: t, StateDir: t.TempDir(), client: s.client(false), user: "reader", pass: "rpass"}
	addr := freePort(t)
	a.URL = "https://" + addr
	a.args = append([]string{"--listen", addr, "--interval", "500ms", "--state-dir", a.StateDir,
		"--rrdd-dir", t.TempDir(), "--log-level", "debug", "--web-config", s.config, "--write-users", "writer"}, args...)
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	return a
}

// routes are every route of the agent, with the role each needs.
var secureRoutes = []struct {
	method, path, body string
	write              bool
}{
	{"GET", "/", "", false},
	{"GET", "/api/v1/status", "", false},
	{"GET", "/api/v1/processes", "", false},
	{"GET", "/api/v1/metrics?match=system.load_avg_1min", "", false},
	{"GET", "/api/v1/history?match=system.load_avg_1min&window=1m", "", false},
	{"GET", "/api/v1/stats?match=system.load_avg_1min&window=1m", "", false},
	{"GET", "/api/v1/peers", "", false},
	{"GET", "/api/v1/cluster/metrics?match=system.load_avg_1min", "", false},
	{"GET", "/api/v1/cluster/history?match=system.load_avg_1min", "", false},
	{"GET", "/api/v1/labels?q=system", "", false},
	{"GET", "/api/v1/alerts", "", false},
	{"GET", "/api/v1/cluster/alerts", "", false},
	{"GET", "/metrics", "", false},
	{"GET", "/influx", "", false},
	{"GET", "/ping", "", false},
	{"GET", "/debug/pprof/", "", true},
	{"POST", "/write", "secure_test v=1", true},
	{"POST", "/api/v2/write", "secure_test v=2", true},
	{"POST", "/v1/metrics", "", true}, // an empty OTLP request (protobuf without Content-Type)
	{"POST", "/api/v1/peers", `{"addr":"127.0.0.1:1"}`, true},
	// The original Cantal agent's API (package cantalv1): /query only reads.
	{"GET", "/status", "", false},
	{"GET", "/all_processes.json", "", false},
	{"GET", "/all_sockets.cbor", "", false},
	{"GET", "/all_metrics", "", false},
	{"GET", "/all_peers.gron", "", false},
	{"GET", "/peers_with_remote", "", false},
	{"POST", "/query", `{"rules":{}}`, false},
	{"POST", "/add_host", `{"addr":"127.0.0.1:1"}`, true},
}

// TestSecureRoutesGoClient: with a web config, every route answers 401 to no credential and to
// a wrong one, reads need reader, writes need writer; a WebSocket and a gossip stream need a
// credential too; plain HTTP on the port gets no data.
func TestSecureRoutesGoClient(t *testing.T) {
	serial(t)
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	a := startSecureAgent(t, s, "--pprof")
	c := s.client(false)
	code := func(method, path, body, user, pass string) int {
		t.Helper()
		req, _ := http.NewRequest(method, a.URL+path, strings.NewReader(body))
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, r := range secureRoutes {
		if got := code(r.method, r.path, r.body, "", ""); got != 401 {
			t.Errorf("%s %s without credentials = %d; want 401", r.method, r.path, got)
		}
		if got := code(r.method, r.path, r.body, "reader", "wrong"); got != 401 {
			t.Errorf("%s %s with a wrong password = %d; want 401", r.method, r.path, got)
		}
		if got := code(r.method, r.path, r.body, "nobody", "rpass"); got != 401 {
			t.Errorf("%s %s as an unknown user = %d; want 401", r.method, r.path, got)
		}
		want := 200
		if r.write {
			want = 403
		} else if r.path == "/ping" {
			want = 204
		}
		if got := code(r.method, r.path, r.body, "reader", "rpass"); got != want {
			t.Errorf("%s %s as reader = %d; want %d", r.method, r.path, got, want)
		}
		if r.write && r.path != "/api/v1/peers" && r.path != "/add_host" { // joining needs --cluster-name
			got := code(r.method, r.path, r.body, "writer", "wpass")
			if got != 200 && got != 204 {
				t.Errorf("%s %s as writer = %d; want 2xx", r.method, r.path, got)
			}
		}
	}
	// The gossip stream path needs a member's certificate, not a password.
	req, _ := http.NewRequest("GET", a.URL+"/api/v1/gossip", nil)
	req.SetBasicAuth("writer", "wpass")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("gossip stream as writer = %v, %v; want 403", resp, err)
	}
	// WebSocket: refused without credentials, accepted with them.
	wsURL := strings.Replace(a.URL, "https://", "wss://", 1) + "/api/v1/ws"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: c}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("WebSocket without credentials: err %v, resp %v; want 401", err, resp)
	}
	hdr := http.Header{}
	req, _ = http.NewRequest("GET", "/", nil)
	req.SetBasicAuth("reader", "rpass")
	hdr.Set("Authorization", req.Header.Get("Authorization"))
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: c, HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("WebSocket as reader: %v", err)
	}
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"a","match":"system.load_avg_1min"}`))
	_, msg, err := ws.Read(ctx)
	if err != nil || !strings.Contains(string(msg), `"update"`) {
		t.Errorf("WebSocket as reader: first message %q, %v; want an update", msg, err)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	// Plain HTTP on the TLS port: no data.
	resp, err := http.Get(strings.Replace(a.URL, "https://", "http://", 1) + "/api/v1/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(b), "series") {
			t.Errorf("plain HTTP on the TLS port: %d %q", resp.StatusCode, b)
		}
	}
}

// TestSecureRoutesCurl: the same with curl, the client most users try first.
func TestSecureRoutesCurl(t *testing.T) {
	serial(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (make setup installs it)")
	}
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	a := startSecureAgent(t, s, "--pprof")
	curl := func(r struct {
		method, path, body string
		write              bool
	}, creds ...string) string {
		args := []string{"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", s.files.CA, "-X", r.method}
		if r.method == "POST" {
			args = append(args, "--data-binary", r.body)
		}
		args = append(args, creds...)
		out, err := exec.Command("curl", append(args, a.URL+r.path)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s %s: %v: %s", r.method, r.path, err, out)
		}
		return string(out)
	}
	for _, r := range secureRoutes {
		if got := curl(r); got != "401" {
			t.Errorf("curl %s %s without credentials = %s; want 401", r.method, r.path, got)
		}
		if got := curl(r, "-u", "reader:wrong"); got != "401" {
			t.Errorf("curl %s %s with a wrong password = %s; want 401", r.method, r.path, got)
		}
		want := "200"
		if r.write {
			want = "403"
		} else if r.path == "/ping" {
			want = "204"
		}
		if got := curl(r, "-u", "reader:rpass"); got != want {
			t.Errorf("curl -u reader %s %s = %s; want %s", r.method, r.path, got, want)
		}
	}
	// With the member's client certificate and no password: reads work.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.crt"), s.member.CertPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "m.key"), s.member.KeyPEM, 0o600)
	out, err := exec.Command("curl", "-sS", "--cacert", s.files.CA, "--cert", filepath.Join(dir, "m.crt"),
		"--key", filepath.Join(dir, "m.key"), a.URL+"/api/v1/metrics?match=system.load_avg_1min").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"system.load_avg_1min"`) {
		t.Errorf("curl with a member certificate: %v: %s", err, out)
	}
	// curl without the CA refuses the agent's certificate; plain HTTP gets no data.
	if out, err := exec.Command("curl", "-sS", a.URL+"/api/v1/status").CombinedOutput(); err == nil {
		t.Errorf("curl without the CA accepted the agent's certificate: %s", out)
	}
	plain := strings.Replace(a.URL, "https://", "http://", 1)
	out, _ = exec.Command("curl", "-sS", "-u", "reader:rpass", plain+"/api/v1/metrics").CombinedOutput()
	if strings.Contains(string(out), "series") {
		t.Errorf("plain HTTP on the TLS port gave data: %s", out)
	}
}

// TestSecurePrometheus: a real Prometheus scrapes the agent over TLS with basic auth (the
// agent's series arrive) and, in a second job with a wrong password, is refused (up is 0).
func TestSecurePrometheus(t *testing.T) {
	serial(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (make setup installs it)")
	}
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	a := startSecureAgent(t, s)
	target := strings.TrimPrefix(a.URL, "https://")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: cantal
    scheme: https
    tls_config: {ca_file: %q}
    basic_auth: {username: reader, password: rpass}
    static_configs: [{targets: [%q]}]
  - job_name: wrong
    scheme: https
    tls_config: {ca_file: %q}
    basic_auth: {username: reader, password: wrong}
    static_configs: [{targets: [%q]}]
`, s.files.CA, target, s.files.CA, target)
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644)
	promAddr := freePort(t)
	p := startProc(t, nil, nil, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	query := func(q string) (string, error) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	waitFor(t, 60*time.Second, func() error {
		out, err := query(`up{job="cantal"}`)
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"1"]`) {
			return fmt.Errorf("up{job=cantal}: %s\nprometheus: %s", out, p.out)
		}
		return nil
	})
	waitFor(t, 30*time.Second, func() error {
		out, err := query(`count({job="cantal",__name__=~".+"})`)
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"result":[{`) {
			return fmt.Errorf("no series from the agent in Prometheus: %s", out)
		}
		out, err = query(`up{job="wrong"}`)
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"0"]`) {
			return fmt.Errorf("up{job=wrong} (wrong password): %s; want 0", out)
		}
		return nil
	})
}
