package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// roundTrip answers every request with one status and body, in process.
type roundTrip struct {
	code int
	body []byte
}

func (rt roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: rt.code, Status: strconv.Itoa(rt.code) + " " + http.StatusText(rt.code),
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(rt.body)), Request: r}, nil
}

// FuzzAnswers feeds arbitrary agent answers to every command (the cluster commands' aggregates
// and statistics, computed here, and top's frame included): never a panic, exit 0 or 1, and
// nothing but an error message on a non-2xx answer.
func FuzzAnswers(f *testing.F) {
	for _, s := range []string{
		`{"series":[{"labels":{"metric":"a"},"kind":"counter","value":1,"ts":1,"rate":"NaN"}]}`,
		`{"series":[{"labels":{"metric":"a"},"kind":"state","value":"x","ts":1,"text":"x","since":5}]}`,
		`{"series":[{"labels":{"metric":"a"},"kind":"level","points":[[1,2],[3,"+Inf"]]}]}`,
		`{"series":[{"labels":{},"count":1,"min":1,"max":"NaN","slope":null}]}`,
		`{"processes":[{"pid":1,"cmdline":["a"],"cpu_percent":1.5,"rss":10}]}`,
		`{"peers":[{"name":"a","rtt_ms":null,"last_seen":0}]}`,
		`{"a":{"b":[1,{"c":2}],"d_ms":3.5,"e_bytes":1e30},"problems":[{"x":1},{"y":[]}]}`,
		`{"error":"bad"}`, `[]`, `{`, `null`,
		`{"nodes":[{"node":"a","status":"ok","series":[{"labels":{"metric":"m","node":"a"},"kind":"counter","value":1,"ts":1,"rate":2}]},{"node":"b","status":"unreachable","error":"x","series":[]}],"aggregate":[{"labels":{"metric":"m"},"kind":"counter","fn":"sum","value":1,"rate":"NaN","nodes":1}]}`,
		`{"nodes":[{"node":"a","status":"ok","series":[{"labels":{"metric":"m","pid":"1"},"kind":"level","points":[[1000,1],[-3000,"-Inf"],[9223372036854775807,2]]},{"labels":{"metric":"m","pid":"2"},"kind":"level","points":[[2000,"NaN"]]}]}]}`,
		`{"node_name":"n","counts":{"processes":2}}`,
	} {
		f.Add(200, []byte(s))
	}
	f.Add(500, []byte(`{"error":"boom"}`))
	f.Fuzz(func(t *testing.T, code int, body []byte) {
		if code < 100 || code > 599 {
			code = 200
		}
		for _, cmd := range [][]string{{"status"}, {"processes"}, {"metrics"}, {"history"}, {"stats"}, {"peers"},
			{"cluster", "metrics", "--agg", "sum"}, {"cluster", "history", "--agg", "avg"}, {"cluster", "stats", "--agg", "max", "--by", "pid"},
			{"cluster", "history", "--agg", "min", "--json"}, {"cluster", "stats", "--json"}, {"top", "--once"}} {
			var out, errb bytes.Buffer
			c := &CLI{Stdout: &out, Stderr: &errb, HTTP: &http.Client{Transport: roundTrip{code, body}},
				Now: func() time.Time { return time.UnixMilli(nowMs) }, Location: time.UTC}
			rc := c.Run(context.Background(), cmd)
			if rc != ExitOK && rc != ExitError {
				t.Fatalf("%s on %d %q: exit %d", cmd, code, body, rc)
			}
			if code/100 != 2 && (rc != ExitError || out.Len() != 0) {
				t.Fatalf("%s on %d: exit %d, stdout %q", cmd, code, rc, out.String())
			}
		}
	})
}

// TestValuesRealProcess reads a live process's metrics through the real /proc: its environ and
// its root.
func TestValuesRealProcess(t *testing.T) {
	base := filepath.Join(t.TempDir(), "live")
	writeApp(t, base)
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"CANTAL_PATH=" + base}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)
	// Start returns after fork; until the child's exec has set up its new environment, its
	// environ is ours or empty (the kernel renames the task before it builds the new stack).
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if env, _ := os.ReadFile("/proc/" + pid + "/environ"); strings.Contains(string(env), "CANTAL_PATH=") {
			break
		}
	}
	var out, errb bytes.Buffer
	c := &CLI{Stdout: &out, Stderr: &errb, Now: func() time.Time { return time.UnixMilli(nowMs) }, Location: time.UTC}
	if code := c.Run(context.Background(), []string{"values", pid}); code != 0 {
		t.Fatalf("values %s = %d: %s", pid, code, errb.String())
	}
	want := `requests.number{pid="` + pid + `", process="sleep"} counter 97 -`
	found := false
	for line := range strings.Lines(out.String()) {
		found = found || strings.Join(strings.Fields(line), " ") == want
	}
	if !found {
		t.Errorf("values %s printed:\n%s\nwant a row %q", pid, out.String(), want)
	}
}
