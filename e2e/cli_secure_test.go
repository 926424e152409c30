package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cantalEnv runs the cantal tool with the CANTAL_* variables of env only (none inherited) and
// standard input not a terminal; it returns stdout, stderr and the exit code.
func cantalEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "cantal"), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CANTAL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("cantal %q: %v", args, err)
	return "", "", -1
}

// TestCLISecure: the cantal tool against a real agent with a web config: over TLS with the CA,
// as a basic-auth user or with a client certificate; refused, with advice, without them.
func TestCLISecure(t *testing.T) {
	serial(t)
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	a := startSecureAgent(t, s)
	dir := t.TempDir()
	memberCert := filepath.Join(dir, "member.crt")
	memberKey := filepath.Join(dir, "member.key")
	pwFile := filepath.Join(dir, "password")
	for _, f := range []struct {
		path string
		data []byte
	}{{memberCert, s.member.CertPEM}, {memberKey, s.member.KeyPEM}, {pwFile, []byte("rpass\n")}} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsArgs := []string{"--agent", a.URL, "--ca-file", s.files.CA}

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string // in stdout
	}{
		{"status as reader", []string{"CANTAL_PASSWORD=rpass"}, append([]string{"status", "--user", "reader"}, tlsArgs...), "node"},
		{"metrics as reader", []string{"CANTAL_PASSWORD=rpass"},
			append([]string{"metrics", "system.load_avg_1min", "--user", "reader"}, tlsArgs...), "system.load_avg_1min"},
		{"all from the environment", []string{"CANTAL_AGENT=" + a.URL, "CANTAL_CA_FILE=" + s.files.CA, "CANTAL_USER=reader", "CANTAL_PASSWORD=rpass"},
			[]string{"metrics", "system.load_avg_1min"}, "system.load_avg_1min"},
		{"password file", nil,
			append([]string{"history", "system.load_avg_1min", "--window", "1m", "--user", "reader", "--password-file", pwFile}, tlsArgs...), "system.load_avg_1min"},
		{"client certificate", nil,
			append([]string{"stats", "system.load_avg_1min", "--cert", memberCert, "--key", memberKey}, tlsArgs...), "system.load_avg_1min"},
		{"processes as writer", []string{"CANTAL_PASSWORD=wpass"}, append([]string{"processes", "--user", "writer"}, tlsArgs...), "cantal-agent"},
		{"top as reader", []string{"CANTAL_PASSWORD=rpass"}, append([]string{"top", "--once", "--user", "reader"}, tlsArgs...), "cantal top - "},
		{"top with a client certificate", nil, append([]string{"top", "--once", "--cert", memberCert, "--key", memberKey}, tlsArgs...), "CPU "},
		{"cluster metrics as reader", []string{"CANTAL_PASSWORD=rpass"},
			append([]string{"cluster", "metrics", "system.load_avg_1min", "--agg", "sum", "--user", "reader"}, tlsArgs...), "AGGREGATE (sum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := cantalEnv(t, tc.env, tc.args...)
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("cantal %q = %d; want 0 and %q in the output\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.want, out, errs)
			}
		})
	}

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		msg  string // stderr begins with it
	}{
		{"status without credentials", nil, append([]string{"status"}, tlsArgs...),
			"cantal: agent answered 401 Unauthorized to /api/v1/status: the agent requires credentials (--user, or --cert/--key)\n"},
		{"metrics without credentials", nil, append([]string{"metrics", "system.load_avg_1min"}, tlsArgs...),
			"cantal: agent answered 401 Unauthorized to /api/v1/metrics: the agent requires credentials (--user, or --cert/--key)\n"},
		{"wrong password", []string{"CANTAL_PASSWORD=wrong"}, append([]string{"status", "--user", "reader"}, tlsArgs...),
			`cantal: agent answered 401 Unauthorized to /api/v1/status: the agent refused user "reader"`},
		{"no password and no terminal", nil, append([]string{"status", "--user", "reader"}, tlsArgs...),
			"cantal: --user reader needs a password: set CANTAL_PASSWORD, give --password-file FILE, or run on a terminal to be asked for it\n"},
		{"without the CA", []string{"CANTAL_PASSWORD=rpass"}, []string{"status", "--agent", a.URL, "--user", "reader"},
			"cantal: cannot verify the agent's certificate at " + a.URL + ": it is not signed by a CA this host trusts (give the agent's CA with --ca-file or CANTAL_CA_FILE)"},
		{"plain HTTP", nil, []string{"status", "--agent", strings.Replace(a.URL, "https://", "http://", 1)},
			"cantal: agent answered 400 Bad Request to /api/v1/status: the agent serves HTTPS: use --agent " + a.URL + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := cantalEnv(t, tc.env, tc.args...)
			if code != 1 || out != "" || !strings.HasPrefix(errs, tc.msg) {
				t.Errorf("cantal %q = %d, stdout %q, stderr\n%s\nwant 1, nothing on stdout, and stderr beginning with\n%s", tc.args, code, out, errs, tc.msg)
			}
			if strings.Contains(errs, "rpass") {
				t.Errorf("cantal %q quoted the password: %s", tc.args, errs)
			}
		})
	}
}

// TestCLISecureUnix: an agent with a web config listening on TCP and on a Unix socket; the
// cantal tool reads through the socket with no credential (the caller is its uid).
func TestCLISecureUnix(t *testing.T) {
	serial(t)
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	sock := filepath.Join(t.TempDir(), "cantal.sock")
	// startSecureAgent, with a second listener: the agent's last --listen wins.
	a := &agent{t: t, StateDir: t.TempDir(), client: s.client(false), user: "reader", pass: "rpass"}
	addr := freePort(t)
	a.URL = "https://" + addr
	a.args = []string{"--listen", addr + ",unix:" + sock, "--interval", "500ms", "--state-dir", a.StateDir,
		"--rrdd-dir", t.TempDir(), "--log-level", "debug", "--web-config", s.config, "--write-users", "writer"}
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })

	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"status", "--agent", "unix:" + sock}, "node"},
		{nil, []string{"metrics", "system.load_avg_1min", "--agent", "unix:" + sock}, "system.load_avg_1min"},
		// The TLS settings a profile may hold are for https:// agents; the socket ignores them.
		{[]string{"CANTAL_AGENT=unix:" + sock, "CANTAL_CA_FILE=" + s.files.CA}, []string{"metrics", "system.load_avg_1min", "-o", "json"}, `"system.load_avg_1min"`},
	} {
		out, errs, code := cantalEnv(t, tc.env, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("cantal %q with %q = %d; want 0 and %q in the output\nstdout:\n%s\nstderr:\n%s", tc.args, tc.env, code, tc.want, out, errs)
		}
	}
	// The TCP listener beside it still wants credentials.
	_, errs, code := cantalEnv(t, nil, "status", "--agent", a.URL, "--ca-file", s.files.CA)
	if want := "cantal: agent answered 401 Unauthorized to /api/v1/status: the agent requires credentials"; code != 1 || !strings.HasPrefix(errs, want) {
		t.Errorf("cantal status over TCP without credentials = %d, %q; want 1 and %q", code, errs, want)
	}
}
