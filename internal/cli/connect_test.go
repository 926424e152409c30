package cli

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/certs"
)

const statusBody = `{"node_id":"4f2a","node_name":"secure-1"}`

// guarded answers /api/v1/status as the agent's access guard would: reader/rpass and a verified
// client certificate may read, guest/gpass is a user without the read role, anyone else gets
// 401. It counts the requests that got through.
func guarded(served *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		user, pass, ok := r.BasicAuth()
		switch {
		case r.TLS != nil && len(r.TLS.VerifiedChains) > 0, ok && user == "reader" && pass == "rpass":
		case ok && user == "guest" && pass == "gpass":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":"forbidden: this route needs the read role"}`+"\n")
			return
		default:
			w.Header().Set("WWW-Authenticate", `Basic realm="cantal", charset="UTF-8"`)
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"authentication required"}`+"\n")
			return
		}
		served.Add(1)
		io.WriteString(w, statusBody)
	})
}

// tlsAgent is an httptest agent serving TLS with a certificate of its own CA, asking for client
// certificates of that CA as clientAuth says.
type tlsAgent struct {
	srv    *httptest.Server
	served atomic.Int32
	files  certs.Files // the server's pair and the CA
	client certs.Files // a client certificate of the same CA
	dir    string
}

func newTLSAgent(t *testing.T, clientAuth tls.ClientAuthType) *tlsAgent {
	t.Helper()
	a := &tlsAgent{dir: t.TempDir()}
	ca, err := certs.NewCA("cli test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("agent", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("cli-client")
	if err != nil {
		t.Fatal(err)
	}
	if a.files, err = ca.WriteFiles(a.dir, "agent", server); err != nil {
		t.Fatal(err)
	}
	if a.client, err = ca.WriteFiles(a.dir, "client", client); err != nil {
		t.Fatal(err)
	}
	pair, err := server.TLS()
	if err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewUnstartedServer(guarded(&a.served))
	a.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	a.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: clientAuth}
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

// run runs the CLI with env and args and returns the exit code, stdout and stderr.
func run(t *testing.T, c *CLI, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	code := c.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func envCLI(env map[string]string) *CLI {
	c, _, _ := testCLI(env)
	c.Password = func(context.Context, string) (string, error) { return "", errNoTerminal }
	return c
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTLSAgent(t *testing.T) {
	a := newTLSAgent(t, tls.VerifyClientCertIfGiven)
	pwFile := writeFile(t, a.dir, "pw", "rpass\n")
	wrongFile := writeFile(t, a.dir, "wrong", "nope\n")
	emptyFile := writeFile(t, a.dir, "empty", "\n")
	otherCA := writeFile(t, a.dir, "other.crt", "not a certificate\n")
	url := a.srv.URL
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		msg  string // the beginning of stderr on failure
	}{
		{"user and CANTAL_PASSWORD", map[string]string{"CANTAL_PASSWORD": "rpass"},
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "reader"}, ExitOK, ""},
		{"all from the environment", map[string]string{"CANTAL_AGENT": url, "CANTAL_CA_FILE": a.files.CA,
			"CANTAL_USER": "reader", "CANTAL_PASSWORD": "rpass"}, []string{"status"}, ExitOK, ""},
		{"password file", nil,
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "reader", "--password-file", pwFile}, ExitOK, ""},
		{"password file flag over CANTAL_PASSWORD", map[string]string{"CANTAL_PASSWORD": "nope"},
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "reader", "--password-file", pwFile}, ExitOK, ""},
		{"CANTAL_PASSWORD over CANTAL_PASSWORD_FILE", map[string]string{"CANTAL_PASSWORD": "rpass", "CANTAL_PASSWORD_FILE": wrongFile},
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "reader"}, ExitOK, ""},
		{"CANTAL_PASSWORD_FILE", map[string]string{"CANTAL_PASSWORD_FILE": pwFile},
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "reader"}, ExitOK, ""},
		{"client certificate", nil,
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--cert", a.client.Cert, "--key", a.client.Key}, ExitOK, ""},
		{"client certificate from the environment", map[string]string{"CANTAL_CERT": a.client.Cert, "CANTAL_KEY": a.client.Key,
			"CANTAL_CA_FILE": a.files.CA}, []string{"status", "--agent", url}, ExitOK, ""},

		{"no credentials", nil, []string{"status", "--agent", url, "--ca-file", a.files.CA}, ExitError,
			"cantal: agent answered 401 Unauthorized to /api/v1/status: the agent requires credentials (--user, or --cert/--key)\n"},
		{"wrong password", map[string]string{"CANTAL_PASSWORD": "nope"},
			[]string{"metrics", "--agent", url, "--ca-file", a.files.CA, "--user", "reader"}, ExitError,
			`cantal: agent answered 401 Unauthorized to /api/v1/metrics: the agent refused user "reader": wrong password, or a user its web config does not list` + "\n"},
		{"user without the role", map[string]string{"CANTAL_PASSWORD": "gpass"},
			[]string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "guest"}, ExitError,
			`cantal: agent answered 403 Forbidden to /api/v1/status: forbidden: this route needs the read role (user "guest" lacks it)` + "\n"},
		{"system roots", map[string]string{"CANTAL_PASSWORD": "rpass"},
			[]string{"status", "--agent", url, "--user", "reader"}, ExitError,
			"cantal: cannot verify the agent's certificate at " + url + ": it is not signed by a CA this host trusts (give the agent's CA with --ca-file or CANTAL_CA_FILE)"},
		{"wrong CA", nil, []string{"status", "--agent", url, "--ca-file", a.client.Cert}, ExitError,
			"cantal: cannot verify the agent's certificate at " + url + ": it is not signed by the CA in --ca-file " + a.client.Cert + ": "},
		{"not a CA file", nil, []string{"status", "--agent", url, "--ca-file", otherCA}, ExitError,
			"cantal: --ca-file " + otherCA + " holds no PEM certificate"},
		{"missing CA file", nil, []string{"status", "--agent", url, "--ca-file", filepath.Join(a.dir, "nope")}, ExitError,
			"cantal: --ca-file: open "},
		{"host name not in the certificate", nil,
			[]string{"status", "--agent", strings.Replace(url, "127.0.0.1", "localhost", 1), "--ca-file", a.files.CA}, ExitError,
			`cantal: the agent's certificate is not valid for "localhost" (--agent must name the agent as its certificate does)`},
		{"plain HTTP to the TLS port", nil, []string{"status", "--agent", strings.Replace(url, "https://", "http://", 1)}, ExitError,
			"cantal: agent answered 400 Bad Request to /api/v1/status: the agent serves HTTPS: use --agent https://" + a.srv.Listener.Addr().String() + "\n"},
		{"cert without key", nil, []string{"status", "--agent", url, "--cert", a.client.Cert}, ExitUsage,
			"cantal: --cert and --key go together"},
		{"ca-file with plain HTTP", nil, []string{"status", "--agent", "http://127.0.0.1:1", "--ca-file", a.files.CA}, ExitUsage,
			"cantal: --ca-file applies to an https:// agent, not http://127.0.0.1:1\n"},
		{"key with a Unix socket", nil, []string{"status", "--agent", "unix:/nonexistent.sock", "--key", a.client.Key}, ExitUsage,
			"cantal: --key applies to an https:// agent, not unix:/nonexistent.sock\n"},
		{"no password anywhere", nil, []string{"status", "--agent", url, "--ca-file", a.files.CA, "--user", "reader"}, ExitError,
			"cantal: --user reader needs a password: set CANTAL_PASSWORD, give --password-file FILE, or run on a terminal to be asked for it\n"},
		{"empty password file", nil, []string{"status", "--agent", url, "--user", "reader", "--password-file", emptyFile}, ExitError,
			"cantal: --password-file " + emptyFile + " is empty\n"},
		{"password in clear", map[string]string{"CANTAL_PASSWORD": "rpass"}, []string{"status", "--agent", "http://192.0.2.1:22682", "--user", "reader"}, ExitError,
			"cantal: refusing to send reader's password in clear to http://192.0.2.1:22682: use --agent https://\n"},
		{"password in the URL", nil, []string{"status", "--agent", "https://reader:rpass@127.0.0.1:1"}, ExitUsage,
			`cantal: --agent "https://reader:xxxxx@127.0.0.1:1": give the user with --user`},
		{"no password flag", nil, []string{"status", "--password", "rpass"}, ExitUsage,
			"cantal: status: flag provided but not defined: -password\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.served.Load()
			code, out, errs := run(t, envCLI(tc.env), tc.args...)
			if code != tc.code {
				t.Fatalf("Run(%q) = %d; want %d; stderr: %s", tc.args, code, tc.code, errs)
			}
			if tc.code == ExitOK {
				if !strings.Contains(out, "secure-1") || errs != "" {
					t.Errorf("Run(%q) printed %q, stderr %q; want the status", tc.args, out, errs)
				}
				if a.served.Load() != before+1 {
					t.Errorf("Run(%q): the agent served %d requests; want 1", tc.args, a.served.Load()-before)
				}
				return
			}
			if !strings.HasPrefix(errs, tc.msg) || out != "" {
				t.Errorf("Run(%q): stdout %q, stderr\n%s\nwant it to begin with\n%s", tc.args, out, errs, tc.msg)
			}
			if strings.Contains(errs, "rpass") {
				t.Errorf("Run(%q) quoted the password: %s", tc.args, errs)
			}
		})
	}
}

// TestPasswordPrompt: without CANTAL_PASSWORD or a password file, the password is asked for,
// naming the user and the agent.
func TestPasswordPrompt(t *testing.T) {
	a := newTLSAgent(t, tls.VerifyClientCertIfGiven)
	var prompts []string
	c := envCLI(nil)
	c.Password = func(_ context.Context, prompt string) (string, error) {
		prompts = append(prompts, prompt)
		return "rpass", nil
	}
	code, out, errs := run(t, c, "status", "--agent", a.srv.URL, "--ca-file", a.files.CA, "--user", "reader")
	if code != ExitOK || !strings.Contains(out, "secure-1") {
		t.Fatalf("status with a prompted password = %d, %q, %q", code, out, errs)
	}
	want := "Password for reader at " + a.srv.URL + ": "
	if len(prompts) != 1 || prompts[0] != want {
		t.Errorf("prompts = %q; want [%q]", prompts, want)
	}
	// No prompt without --user, and none when the environment has the password.
	prompts = nil
	c.Getenv = func(k string) string { return map[string]string{"CANTAL_PASSWORD": "rpass"}[k] }
	run(t, c, "status", "--agent", a.srv.URL, "--ca-file", a.files.CA, "--user", "reader")
	run(t, c, "status", "--agent", a.srv.URL, "--ca-file", a.files.CA)
	if len(prompts) != 0 {
		t.Errorf("prompted %q with the password in the environment or no user", prompts)
	}
	c.Password = func(context.Context, string) (string, error) { return "", io.EOF }
	c.Getenv = func(string) string { return "" }
	if code, _, errs := run(t, c, "status", "--agent", a.srv.URL, "--user", "reader"); code != ExitError || errs != "cantal: read the password: EOF\n" {
		t.Errorf("prompt ended by EOF: %d, %q", code, errs)
	}
}

// TestRequiredClientCert: an agent that requires a client certificate refuses the handshake
// without one, and with one of another CA; the messages name --cert.
func TestRequiredClientCert(t *testing.T) {
	a := newTLSAgent(t, tls.RequireAndVerifyClientCert)
	other := newTLSAgent(t, tls.NoClientCert)
	code, out, errs := run(t, envCLI(nil), "status", "--agent", a.srv.URL, "--ca-file", a.files.CA, "--cert", a.client.Cert, "--key", a.client.Key)
	if code != ExitOK || !strings.Contains(out, "secure-1") {
		t.Fatalf("status with the client certificate = %d, %q, %q", code, out, errs)
	}
	code, _, errs = run(t, envCLI(nil), "status", "--agent", a.srv.URL, "--ca-file", a.files.CA)
	if want := "cantal: the agent at " + a.srv.URL + " refused the TLS handshake; it may require a client certificate (--cert/--key): "; code != ExitError || !strings.HasPrefix(errs, want) {
		t.Errorf("no client certificate: %d, %q; want %q", code, errs, want)
	}
	code, _, errs = run(t, envCLI(nil), "status", "--agent", a.srv.URL, "--ca-file", a.files.CA, "--cert", other.client.Cert, "--key", other.client.Key)
	if want := "cantal: the agent at " + a.srv.URL + " refused the client certificate " + other.client.Cert + " (is it issued by the CA of the agent's client_ca_file"; code != ExitError || !strings.HasPrefix(errs, want) {
		t.Errorf("client certificate of another CA: %d, %q; want %q", code, errs, want)
	}
	// An agent that does not ask for certificates answers 401 to one.
	code, _, errs = run(t, envCLI(nil), "status", "--agent", other.srv.URL, "--ca-file", other.files.CA, "--cert", other.client.Cert, "--key", other.client.Key)
	if want := "cantal: agent answered 401 Unauthorized to /api/v1/status: the agent did not take the client certificate " + other.client.Cert + " as a credential"; code != ExitError || !strings.HasPrefix(errs, want) {
		t.Errorf("client certificate not asked for: %d, %q; want %q", code, errs, want)
	}
	// A plain-HTTP agent named with https://.
	plain := httptest.NewServer(guarded(new(atomic.Int32)))
	defer plain.Close()
	https := strings.Replace(plain.URL, "http://", "https://", 1)
	code, _, errs = run(t, envCLI(nil), "status", "--agent", https)
	if want := "cantal: the agent at " + https + " does not speak TLS (use --agent " + plain.URL + "): "; code != ExitError || !strings.HasPrefix(errs, want) {
		t.Errorf("https to a plain agent: %d, %q; want %q", code, errs, want)
	}
}

// TestUnixSocket: --agent unix:PATH speaks HTTP over the socket (and CANTAL_AGENT too); the
// TLS settings of the environment are ignored there, the credentials still sent.
func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "cantal.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, _ := r.BasicAuth()
		got = append(got, r.Host+" "+r.URL.String()+" "+user)
		io.WriteString(w, `{"series":[{"labels":{"metric":"system.load_avg_1min"},"kind":"float","value":0.5,"ts":1699999998000}]}`)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"metrics", "system.load_avg_1min", "--agent", "unix:" + sock}, "localhost /api/v1/metrics?match=system.load_avg_1min "},
		{map[string]string{"CANTAL_AGENT": "unix://" + sock, "CANTAL_CA_FILE": "/nonexistent", "CANTAL_CERT": "/x", "CANTAL_KEY": "/y"},
			[]string{"metrics"}, "localhost /api/v1/metrics "},
		{map[string]string{"CANTAL_USER": "ops", "CANTAL_PASSWORD": "pw"}, []string{"metrics", "--agent", "unix:" + sock}, "localhost /api/v1/metrics ops"},
	} {
		got = nil
		code, out, errs := run(t, envCLI(tc.env), tc.args...)
		if code != ExitOK || !strings.Contains(out, "system.load_avg_1min") {
			t.Errorf("Run(%q) with %v = %d, %q, %q", tc.args, tc.env, code, out, errs)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("Run(%q) with %v sent %q; want [%q]", tc.args, tc.env, got, tc.want)
		}
	}
	missing := filepath.Join(dir, "missing.sock")
	code, _, errs := run(t, envCLI(nil), "status", "--agent", "unix:"+missing)
	if want := "cantal: cannot reach the agent at unix:" + missing + ": nothing listens there (is cantal-agent running? see --agent or CANTAL_AGENT): dial unix " + missing + ": "; code != ExitError || !strings.HasPrefix(errs, want) {
		t.Errorf("missing socket: %d, %q; want %q", code, errs, want)
	}
	code, _, errs = run(t, envCLI(nil), "status", "--agent", "unix:")
	if want := `cantal: --agent "unix:": want unix:PATH, the agent's socket` + "\n"; code != ExitUsage || !strings.HasPrefix(errs, want) {
		t.Errorf("empty socket path: %d, %q; want %q", code, errs, want)
	}
}

// hungAgent is a listener that accepts connections and never answers (an agent stopped with
// SIGSTOP, or hung): it returns its http:// address. Connections close with the test.
func hungAgent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestTimeout: an agent that accepts but never answers costs --timeout (or CANTAL_TIMEOUT), and
// is reported as not answering, not as possibly not running; a refused connection is.
func TestTimeout(t *testing.T) {
	hung := hungAgent(t)
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}()
	for _, tc := range []struct {
		args     []string
		env      map[string]string
		want     string
		wantNot  string
		exitCode int
	}{
		{[]string{"status", "--agent", hung, "--timeout", "300ms"}, nil,
			"cantal: the agent at " + hung + " did not answer within 300ms (it may be running but hung", "is cantal-agent running", ExitError},
		{[]string{"metrics", "--agent", hung}, map[string]string{"CANTAL_TIMEOUT": "200ms"},
			"cantal: the agent at " + hung + " did not answer within 200ms", "is cantal-agent running", ExitError},
		{[]string{"cluster", "history", "--agent", hung, "--timeout=250ms"}, nil,
			"cantal: the agent at " + hung + " did not answer within 250ms", "", ExitError},
		{[]string{"status", "--agent", refused, "--timeout", "5s"}, nil,
			"cantal: cannot reach the agent at " + refused + ": nothing listens there (is cantal-agent running?", "did not answer", ExitError},
		{[]string{"status", "--timeout", "0s"}, nil, `cantal: status: --timeout "0s": want a positive duration`, "", ExitUsage},
		{[]string{"status"}, map[string]string{"CANTAL_TIMEOUT": "soon"}, `cantal: status: --timeout "soon": want a positive duration`, "", ExitUsage},
	} {
		c, _, errb := testCLI(tc.env)
		done := make(chan int, 1)
		go func() { done <- c.Run(context.Background(), tc.args) }()
		select {
		case code := <-done:
			msg := errb.String()
			if code != tc.exitCode || !strings.HasPrefix(msg, tc.want) || tc.wantNot != "" && strings.Contains(msg, tc.wantNot) {
				t.Errorf("Run(%q) env %v = %d, %q; want %d, %q (without %q)", tc.args, tc.env, code, msg, tc.exitCode, tc.want, tc.wantNot)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Run(%q) env %v still waits for the hung agent after 20s", tc.args, tc.env)
		}
	}
	if DefaultTimeout > 10*time.Second {
		t.Errorf("DefaultTimeout = %v; a hung agent must not cost more than 10s per command", DefaultTimeout)
	}
}
