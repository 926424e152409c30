package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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
