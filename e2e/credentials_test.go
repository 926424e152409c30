package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Remote-write credentials stay off what the agent shows (issue 31, N12):
//   - a --remote-write URL with a password on the command line is refused at start, without
//     the password in the message;
//   - the same URL in CANTAL_REMOTE_WRITE is used (the receiver gets the basic auth);
//   - a receiver's own error text is in the status for a writer, not for a reader;
//   - /debug/pprof/cmdline and the status hold no password.
func TestRemoteWriteCredentialsNotShown(t *testing.T) {
	serial(t)
	const pw = "rw-s3cret-pw"
	out, err := exec.CommandContext(context.Background(), filepath.Join(bin, "cantal-agent"), "--listen", freePort(t),
		"--remote-write", "http://alice:"+pw+"@127.0.0.1:1/api/v1/write").CombinedOutput()
	if err == nil || strings.Contains(string(out), pw) || !strings.Contains(string(out), "CANTAL_REMOTE_WRITE") {
		t.Errorf("--remote-write with a password: %v, %q; want a refusal naming CANTAL_REMOTE_WRITE, without the password", err, out)
	}

	gotAuth := make(chan string, 100)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		select {
		case gotAuth <- u + ":" + p:
		default:
		}
		http.Error(w, "RECEIVER-TEXT: tenant quota exceeded for token abc", http.StatusBadRequest)
	}))
	defer rcv.Close()
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	a := &agent{t: t, StateDir: t.TempDir(), client: s.client(false), user: "reader", pass: "rpass",
		env: []string{"CANTAL_REMOTE_WRITE=http://alice:" + pw + "@" + strings.TrimPrefix(rcv.URL, "http://") + "/api/v1/write"}}
	addr := freePort(t)
	a.URL = "https://" + addr
	a.args = []string{"--listen", addr, "--interval", "500ms", "--state-dir", a.StateDir, "--rrdd-dir", t.TempDir(),
		"--web-config", s.config, "--write-users", "writer", "--pprof"}
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	select {
	case auth := <-gotAuth:
		if auth != "alice:"+pw {
			t.Errorf("receiver got basic auth %q; want the URL's", auth)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver got no request")
	}
	type rwStatus struct {
		RemoteWrite []struct {
			URL       string `json:"url"`
			LastError string `json:"last_error"`
		} `json:"remote_write"`
	}
	var writer rwStatus
	waitFor(t, 20*time.Second, func() error {
		a.user, a.pass = "writer", "wpass"
		defer func() { a.user, a.pass = "reader", "rpass" }()
		writer = rwStatus{}
		if err := a.get("/api/v1/status", &writer); err != nil {
			return err
		}
		if len(writer.RemoteWrite) != 1 || !strings.Contains(writer.RemoteWrite[0].LastError, "RECEIVER-TEXT") {
			return fmt.Errorf("writer's status %+v; want the receiver's text in last_error", writer)
		}
		return nil
	})
	_, body := a.raw("GET", "/api/v1/status", "")
	if strings.Contains(body, "RECEIVER-TEXT") || strings.Contains(body, "abc") || !strings.Contains(body, "400 Bad Request") {
		t.Errorf("reader's status remote_write: %.600s; want the status code without the receiver's text", body[strings.Index(body, `"remote_write"`):])
	}
	if strings.Contains(body, pw) {
		t.Error("reader's status shows the password")
	}
	a.user, a.pass = "writer", "wpass"
	code, cl := a.raw("GET", "/debug/pprof/cmdline", "")
	if code != 200 || strings.Contains(cl, pw) || !strings.Contains(cl, "--pprof") {
		t.Errorf("/debug/pprof/cmdline: %d %q", code, cl)
	}
	_, body = a.raw("GET", "/api/v1/status", "")
	if strings.Contains(body, pw) {
		t.Error("writer's status shows the password")
	}
}
