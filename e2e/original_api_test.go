package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestOriginalCantalRoutesServeTheirSchemas: the real agent answers the original Cantal agent's
// routes (issue 35 item 6) in their schemas, not with the UI's HTML: JSON objects with the
// original's fields, /all_metrics and /query in CBOR (decoded with fxamacker/cbor) under the
// original's keys; an unknown suffix still reaches the UI, POST /add_host without gossip is a
// 409 and a GET of it a 405.
func TestOriginalCantalRoutesServeTheirSchemas(t *testing.T) {
	serial(t)
	a := startAgent(t)
	do := func(method, path, body string) (int, string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, a.URL+path, strings.NewReader(body))
		resp, err := a.do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	for path, fields := range map[string][]string{
		"/status":                 {"version", "startup_time", "scan_duration", "storage", "boot_time", "self_report", "threads_report", "num_peers", "num_stale"},
		"/status.json":            {"version", "num_peers"},
		"/all_processes":          {"boot_time", "all"},
		"/all_sockets.json":       {"global", "by_user", "passive", "active"},
		"/all_peers":              {"peers"},
		"/peers_with_remote.json": {"peers"},
	} {
		code, ct, b := do("GET", path, "")
		var m map[string]any
		if code != 200 || ct != "application/json" || json.Unmarshal(b, &m) != nil {
			t.Errorf("GET %s: %d %s %.80s", path, code, ct, b)
			continue
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("GET %s: no %q in %.200s", path, f, b)
			}
		}
	}
	// A process row has the original's MinimalProcess fields, the agent's own among them.
	var procs struct {
		All []map[string]any `json:"all"`
	}
	_, _, b := do("GET", "/all_processes", "")
	json.Unmarshal(b, &procs)
	found := false
	for _, p := range procs.All {
		for _, f := range []string{"pid", "ppid", "uid", "gid", "name", "state", "vsize", "rss", "num_threads", "start_time", "user_time", "system_time", "cmdline", "read_bytes", "write_bytes"} {
			if _, ok := p[f]; !ok {
				t.Fatalf("process %v has no %q", p, f)
			}
		}
		found = found || p["name"] == "cantal-agent"
	}
	if !found {
		t.Errorf("/all_processes: the agent itself not among %d processes", len(procs.All))
	}
	for _, path := range []string{"/status.cbor", "/all_sockets.cbor"} {
		code, ct, b := do("GET", path, "")
		var m map[string]any
		if code != 200 || ct != "application/cbor" || cbor.Unmarshal(b, &m) != nil || len(m) < 4 {
			t.Errorf("GET %s: %d %s %v", path, code, ct, m)
		}
	}
	if code, ct, b := do("GET", "/status.gron", ""); code != 200 || ct != "text/x-gron" || !bytes.HasPrefix(b, []byte("json = {};\n")) {
		t.Errorf("GET /status.gron: %d %s %.80s", code, ct, b)
	}
	// /all_metrics: CBOR {"metrics": [[key bytes, ts, [tag, value]]...]} with the original's keys.
	code, ct, b := do("GET", "/all_metrics", "")
	var am struct {
		Metrics [][]cbor.RawMessage `cbor:"metrics"`
	}
	if code != 200 || ct != "application/cbor" || cbor.Unmarshal(b, &am) != nil {
		t.Fatalf("GET /all_metrics: %d %s", code, ct)
	}
	keys := map[string]bool{}
	for _, m := range am.Metrics {
		var kb []byte
		var k map[string]string
		if len(m) != 3 || cbor.Unmarshal(m[0], &kb) != nil || (len(kb) > 0 && cbor.Unmarshal(kb, &k) != nil) {
			t.Fatalf("metric %x: want [key bytes, ts, value]", m)
		}
		if len(k) == 1 { // machine-wide: per-CPU series keep this agent's names (the original has none)
			keys[k["metric"]] = true
		}
	}
	for _, want := range []string{"cpu.user", "load_avg_1min", "uptime", "memory.MemTotal", "net.tcp.established"} {
		if !keys[want] {
			t.Errorf("/all_metrics: no %s among %d metrics", want, len(am.Metrics))
		}
	}
	if keys["cpu.user_ms"] || keys["system.load_avg_1min"] {
		t.Errorf("/all_metrics has this agent's names")
	}
	// /query: the original's JSON query language, answered in CBOR; a read.
	code, ct, b = do("POST", "/query.cbor", `{"rules": {"load": {"series": {"source": "Fine", "condition": ["Eq", "metric", "load_avg_1min"]}, "extract": ["Tip"], "functions": [["Sum", "Ignore"]]}}}`)
	var q struct {
		Values map[string][]any `cbor:"values"`
	}
	if code != 200 || ct != "application/cbor" || cbor.Unmarshal(b, &q) != nil {
		t.Fatalf("POST /query.cbor: %d %s %s", code, ct, b)
	}
	if d := q.Values["load"]; len(d) != 4 || d[0] != uint64(200) {
		t.Errorf("load: %v; want SingleTip [200, key, value, [t0, t1]]", d)
	}
	if code, _, b := do("POST", "/query", `{"rules": {"x": ["bad"]}}`); code != 400 || !bytes.Contains(b, []byte("error")) {
		t.Errorf("bad query: %d %s", code, b)
	}
	if code, _, _ := do("POST", "/add_host", `{"addr": "127.0.0.1:1"}`); code != 409 {
		t.Errorf("add_host without gossip: %d; want 409", code)
	}
	if code, _, _ := do("GET", "/add_host", ""); code != 405 {
		t.Errorf("GET /add_host: %d; want 405", code)
	}
}

// unixDo sends method path (with body) to the agent's Unix socket as uid, with curl, and
// returns the raw answer.
func unixDo(t *testing.T, sock string, uid int, method, path, body string) []byte {
	t.Helper()
	args := []string{"-sS", "--unix-socket", sock, "-X", method, "http://localhost" + path}
	if body != "" {
		args = append(args, "--data-binary", body)
	}
	cmd := exec.Command("curl", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %s %s as %d: %v", method, path, uid, err)
	}
	return out
}

// originalKeysPIDs returns the pid labels of the keys of an /all_metrics answer, or of a
// /query answer's MultiTip dataset named name.
func originalKeysPIDs(t *testing.T, b []byte, name string) map[string]bool {
	t.Helper()
	var entries [][]cbor.RawMessage
	if name == "" {
		var am struct {
			Metrics [][]cbor.RawMessage `cbor:"metrics"`
		}
		if err := cbor.Unmarshal(b, &am); err != nil {
			t.Fatalf("/all_metrics: %v: %.200s", err, b)
		}
		entries = am.Metrics
	} else {
		var q struct {
			Values map[string][]cbor.RawMessage `cbor:"values"`
		}
		if err := cbor.Unmarshal(b, &q); err != nil || len(q.Values[name]) != 2 || cbor.Unmarshal(q.Values[name][1], &entries) != nil {
			t.Fatalf("/query: %v: %.200s", err, b)
		}
	}
	pids := map[string]bool{}
	for _, e := range entries {
		var kb []byte
		var k map[string]string
		if len(e) == 0 || cbor.Unmarshal(e[0], &kb) != nil || (len(kb) > 0 && cbor.Unmarshal(kb, &k) != nil) {
			t.Fatalf("entry %x has no key", e)
		}
		if k["pid"] != "" {
			pids[k["pid"]] = true
		}
	}
	return pids
}

// checkOriginalRoutesPrivacy: the original Cantal routes show a caller what /api/v1 shows it
// (finding 12's rules): nobody on the socket sees its own process and not root's in
// /all_processes, /all_metrics and /query; another user over TCP sees no process.
func checkOriginalRoutesPrivacy(t *testing.T, a *agent, sock string, mine, roots *proc) {
	t.Helper()
	var pr struct {
		All []struct {
			PID     int    `json:"pid"`
			UID     int    `json:"uid"`
			Cmdline string `json:"cmdline"`
		} `json:"all"`
	}
	out := unixDo(t, sock, nobody, "GET", "/all_processes", "")
	if err := json.Unmarshal(out, &pr); err != nil {
		t.Fatalf("nobody's /all_processes: %v: %.200s", err, out)
	}
	seen := map[int]bool{}
	for _, p := range pr.All {
		seen[p.PID] = true
		if p.UID != nobody {
			t.Errorf("nobody's /all_processes shows process %d of uid %d", p.PID, p.UID)
		}
	}
	if !seen[mine.cmd.Process.Pid] || seen[roots.cmd.Process.Pid] {
		t.Errorf("nobody's /all_processes: own process seen %v, root's seen %v", seen[mine.cmd.Process.Pid], seen[roots.cmd.Process.Pid])
	}
	if all := unixDo(t, sock, 0, "GET", "/all_processes", ""); bytes.Contains(all, []byte("ROOT-SECRET")) || bytes.Contains(all, []byte("abc123")) {
		t.Errorf("root's /all_processes shows a secret from a command line")
	}
	q := `{"rules": {"p": {"series": {"source": "Fine", "condition": ["Has", "pid"]}, "extract": ["Tip"], "functions": []}}}`
	for what, pids := range map[string]map[string]bool{
		"/all_metrics": originalKeysPIDs(t, unixDo(t, sock, nobody, "GET", "/all_metrics", ""), ""),
		"/query":       originalKeysPIDs(t, unixDo(t, sock, nobody, "POST", "/query", q), "p"),
	} {
		if pids[roots.pid()] || !pids[mine.pid()] {
			t.Errorf("nobody's %s: root's process %v, own process %v; want false, true", what, pids[roots.pid()], pids[mine.pid()])
		}
	}
	if pids := originalKeysPIDs(t, unixDo(t, sock, 0, "GET", "/all_metrics", ""), ""); !pids[roots.pid()] {
		t.Errorf("root's /all_metrics lacks root's process %s", roots.pid())
	}
	// Another user sees at most its own curl (see TestHidePIDUserSeesOnlyOwnProcesses).
	code, body := a.tcpAs(otherUID, "GET", "/all_processes", "")
	if code == 200 {
		var procs struct {
			All []map[string]any `json:"all"`
		}
		if err := json.Unmarshal([]byte(body), &procs); err != nil {
			t.Fatalf("another user's /all_processes: %v: %.200s", err, body)
		}
		for _, p := range procs.All {
			if uid, _ := p["uid"].(float64); uid != otherUID {
				t.Errorf("another user's /all_processes over TCP lists process %v of uid %v under hidepid", p["pid"], p["uid"])
			}
		}
	}
	_, body = a.tcpAs(otherUID, "POST", "/query", q)
	if pids := originalKeysPIDs(t, []byte(body), "p"); pids[roots.pid()] || pids[mine.pid()] {
		t.Errorf("another user's /query over TCP has root's (%v) or nobody's (%v) process under hidepid", pids[roots.pid()], pids[mine.pid()])
	}
}
