package agent

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A --remote-write URL with a password on the command line is refused, with an error that
// names the way out and not the password; the same URL from the environment
// (CANTAL_REMOTE_WRITE, private to the agent's user) is taken. (issue 31, N12)
func TestRemoteWritePasswordNotOnCommandLine(t *testing.T) {
	const u = "https://alice:s3cret-pw@metrics.example/api/v1/write"
	_, err := ParseFlags("cantal-agent", []string{"--remote-write", u}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "CANTAL_REMOTE_WRITE") {
		t.Errorf("--remote-write with a password: %v; want a refusal naming CANTAL_REMOTE_WRITE, without the password", err)
	}
	env := map[string]string{"CANTAL_REMOTE_WRITE": u}
	c, err := ParseFlags("cantal-agent", nil, func(k string) string { return env[k] })
	if err != nil || len(c.RemoteWrite) != 1 || c.RemoteWrite[0] != u {
		t.Errorf("CANTAL_REMOTE_WRITE: %v %q; want it taken", err, c.RemoteWrite)
	}
	for _, u := range []string{"https://ghp_t0ken@metrics.example/w", "https://metrics.example/w?api_key=s3cret-pw"} {
		if _, err := ParseFlags("cantal-agent", []string{"--remote-write", u}, nil); err == nil || strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), "t0ken") {
			t.Errorf("%s: %v; want a refusal without the credential", u, err)
		}
	}
	if _, err := ParseFlags("cantal-agent", []string{"--remote-write", "https://metrics.example/w?db=x"}, nil); err != nil {
		t.Errorf("a URL without a credential: %v; want it taken", err)
	}
}

// /debug/pprof/cmdline serves the command line redacted, as the process list does. (N12)
func TestPprofCmdlineRedacted(t *testing.T) {
	args := []string{"cantal-agent", "--listen", ":22682", "--remote-write", "https://u:s3cret-pw@h/w", "--db-password=hunter2"}
	w := httptest.NewRecorder()
	cmdline(args)(w, httptest.NewRequest("GET", "/debug/pprof/cmdline", nil))
	got := w.Body.String()
	if strings.Contains(got, "s3cret-pw") || strings.Contains(got, "hunter2") || !strings.Contains(got, "--listen\x00:22682") {
		t.Errorf("cmdline %q; want the arguments NUL-separated with the secrets redacted", got)
	}
}

// An --alertmanager URL with a password on the command line is refused as --remote-write's is,
// naming CANTAL_ALERTMANAGER and --alertmanager-config; from the environment it is taken.
func TestAlertmanagerPasswordNotOnCommandLine(t *testing.T) {
	const u = "https://alice:s3cret-pw@am.example:9093"
	_, err := ParseFlags("cantal-agent", []string{"--alertmanager", u}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "CANTAL_ALERTMANAGER") ||
		!strings.Contains(err.Error(), "--alertmanager-config") {
		t.Errorf("--alertmanager with a password: %v; want a refusal naming CANTAL_ALERTMANAGER and --alertmanager-config, without the password", err)
	}
	env := map[string]string{"CANTAL_ALERTMANAGER": u}
	c, err := ParseFlags("cantal-agent", nil, func(k string) string { return env[k] })
	if err != nil || len(c.Alertmanagers) != 1 || c.Alertmanagers[0] != u {
		t.Errorf("CANTAL_ALERTMANAGER: %v %q; want it taken", err, c.Alertmanagers)
	}
}
