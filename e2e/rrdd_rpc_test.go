package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rpcPlugin is an XAPI rrdd plugin as XAPI's Python library (rrdd.py) makes one, standard
// library only: it talks XML-RPC over HTTP on a Unix socket the way rrdd.py does (POST to
// "http://_var_xapi_xcp-rrdd/", a (None,) param for argument-less calls, answers unwrapped
// from xapi-idl's {Status, Value | ErrorDescription} struct), asks get_header and get_path,
// registers before every reading and sleeps until next_reading, writes protocol v2 into the
// file get_path named as rrdd.py's update() does (values and metadata first, then the header,
// in place), and deregisters when stopped. It prints what the agent answered, one JSON object
// a line. Arguments: socket path, plugin uid.
const rpcPlugin = `
import http.client, json, os, signal, socket, sys, time, xmlrpc.client
from struct import pack
from zlib import crc32

SOCKET, UID = sys.argv[1], sys.argv[2]

class UnixHTTPConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(SOCKET)

class UnixTransport(xmlrpc.client.Transport):
    def make_connection(self, host):
        return UnixHTTPConnection(host)

class Failure(Exception):
    def __init__(self, details):
        self.details = details

class Proxy(xmlrpc.client.ServerProxy):
    def __init__(self, uri, transport):
        xmlrpc.client.ServerProxy.__init__(self, uri, transport, None, False, True)

    def request(self, method, params):
        if len(params) == 0:
            params = (None,)
        answer = getattr(self, method)(*params)
        if type(answer) != dict or "Status" not in answer:
            raise xmlrpc.client.Fault(500, "Missing Status in response from server")
        if answer["Status"] == "Success":
            return answer["Value"]
        raise Failure(answer["ErrorDescription"])

class Dispatcher:
    def __init__(self, send, name):
        self.send, self.name = send, name
    def __getattr__(self, name):
        return Dispatcher(self.send, name if self.name is None else self.name + "." + name)
    def __call__(self, *args):
        return self.send(self.name, args)

def report(**kw):
    print(json.dumps(kw), flush=True)

rpc = Dispatcher(Proxy("http://_var_xapi_xcp-rrdd/", UnixTransport()).request, None).Plugin

def stop(signum, frame):
    raise SystemExit(0)
signal.signal(signal.SIGTERM, stop)

while True:
    try:
        header = rpc.get_header()
        path = rpc.get_path({"uid": UID})
        break
    except socket.error:
        print("Failed to contact xcp-rrdd. Sleeping ..", file=sys.stderr, flush=True)
        time.sleep(0.2)
report(header=header, path=path)
report(before_register=rpc.next_reading({"uid": UID}))
for bad in ("../escape", "a/b", "." + UID):
    try:
        report(bad_uid_path=rpc.get_path({"uid": bad}))
    except Failure as f:
        report(bad_uid=f.details)

os.makedirs(os.path.dirname(path), exist_ok=True)
dest = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT), "r+b")

def update(datasources):
    timestamp = time.time()
    values, meta = [], {}
    checksum = crc32(pack(">d", timestamp)) & 0xffffffff
    for name, (value, value_type, ty, units) in sorted(datasources.items()):
        v = pack(">d", value) if value_type == "float" else pack(">Q", value)
        values.append(v)
        checksum = crc32(v, checksum) & 0xffffffff
        meta[name] = {"description": name, "owner": "host", "value_type": value_type, "type": ty,
                      "default": "true", "units": units, "min": "-inf", "max": "inf"}
    metadata = json.dumps({"datasources": meta}, sort_keys=True).encode("utf-8")
    dest.seek(len(b"DATASOURCES") + 20)
    for v in values:
        dest.write(v)
    dest.write(pack(">L", len(metadata)))
    dest.write(metadata)
    dest.flush()
    dest.seek(0)
    dest.write(b"DATASOURCES")
    dest.write(pack(">LLLd", checksum, crc32(metadata) & 0xffffffff, len(values), timestamp))
    dest.flush()

try:
    n = 0
    while True:
        next_reading = rpc.register({"uid": UID, "frequency": "Five_Seconds"})
        if n == 0:
            report(register=next_reading, next_reading=rpc.next_reading({"uid": UID}))
        time.sleep(max(next_reading, 0))
        n += 1
        update({
            "rpc_temperature": (36.6, "float", "gauge", "degC"),
            "rpc_sessions": (42, "int64", "absolute", ""),
            "rpc_requests": (1000 * n, "int64", "derive", "requests"),
        })
        if n == 1:
            report(wrote=path)
finally:
    report(deregister=rpc.deregister({"uid": UID}), after_deregister=rpc.next_reading({"uid": UID}))
`

// TestRRDDRPCPythonPlugin: a plugin written against xcp-rrdd's XML-RPC protocol, the way XAPI's
// rrdd.py talks, registers with the agent on --rrdd-rpc (which made --rrdd-dir), writes its
// file where the agent told it, and its datasources are served with the host's owner.
func TestRRDDRPCPythonPlugin(t *testing.T) {
	serial(t)
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no python3")
	}
	dir := filepath.Join(t.TempDir(), "shm", "metrics") // missing: the agent makes it
	sock := filepath.Join(t.TempDir(), "xapi", "xcp-rrdd")
	a := startAgent(t, "--rrdd-dir", dir, "--rrdd-rpc", sock)

	var st syscall.Stat_t
	if err := syscall.Lstat(sock, &st); err != nil {
		t.Fatalf("the agent made no socket at --rrdd-rpc: %v", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || st.Mode&0o777 != 0o600 || st.Uid != uint32(os.Geteuid()) {
		t.Errorf("socket mode %o uid %d; want a socket, 0600, uid %d", st.Mode, st.Uid, os.Geteuid())
	}
	if err := syscall.Stat(dir, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Mode&0o777 != 0o755 {
		t.Errorf("--rrdd-dir mode %o, %v; want a directory made 0755", st.Mode, err)
	}

	script := filepath.Join(t.TempDir(), "rpc_plugin.py")
	if err := os.WriteFile(script, []byte(rpcPlugin), 0o644); err != nil {
		t.Fatal(err)
	}
	const uid = "xcp-rrdd-e2e"
	p := startProc(t, nil, nil, py, script, sock, uid)

	waitFor(t, 20*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{plugin="`+uid+`"}`)
		if err != nil {
			return err
		}
		temp := find(ss, "rpc_temperature")
		if temp == nil || temp.Kind != "float" || num(temp.Value) != 36.6 || temp.Labels["owner"] != "host" || temp.Labels["units"] != "degC" {
			return fmt.Errorf("rpc_temperature = %+v; want float 36.6 degC owned by host (all: %+v; plugin output:\n%s)", temp, ss, p.out)
		}
		sess := find(ss, "rpc_sessions")
		if sess == nil || sess.Kind != "level" || num(sess.Value) != 42 {
			return fmt.Errorf("rpc_sessions = %+v; want level 42", sess)
		}
		req := find(ss, "rpc_requests")
		if req == nil || req.Kind != "counter" || num(req.Value) < 1000 {
			return fmt.Errorf("rpc_requests = %+v; want a counter of at least 1000", req)
		}
		return nil
	})
	if fi, err := os.Lstat(filepath.Join(dir, uid)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the plugin's file is not %s: %v", filepath.Join(dir, uid), err)
	}
	// The status lists the registered plugin.
	var st2 struct {
		RRDDRPC struct {
			Socket  string
			Plugins []struct{ UID, Protocol string }
			Calls   uint64
		} `json:"rrdd_rpc"`
	}
	if err := a.get("/api/v1/status", &st2); err != nil {
		t.Fatal(err)
	}
	if st2.RRDDRPC.Socket != sock || len(st2.RRDDRPC.Plugins) != 1 || st2.RRDDRPC.Plugins[0].UID != uid || st2.RRDDRPC.Calls == 0 {
		t.Errorf("status rrdd_rpc = %+v; want the socket %s and the plugin %s registered", st2.RRDDRPC, sock, uid)
	}

	// Stopped, the plugin deregisters; then what the agent answered it is all in its output.
	p.kill()
	answers := map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(p.out.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue // stderr
		}
		for k, v := range m {
			if k == "bad_uid" {
				answers[k] = append(asSlice(answers[k]), v)
				continue
			}
			answers[k] = v
		}
	}
	t.Logf("the agent answered: %v", answers)
	if answers["header"] != "DATASOURCES\n" {
		t.Errorf("get_header = %#v; want %q", answers["header"], "DATASOURCES\n")
	}
	if answers["path"] != filepath.Join(dir, uid) {
		t.Errorf("get_path = %#v; want %q", answers["path"], filepath.Join(dir, uid))
	}
	if answers["before_register"] != -1.0 {
		t.Errorf("next_reading before register = %#v; want -1", answers["before_register"])
	}
	for _, k := range []string{"register", "next_reading"} {
		if f, ok := answers[k].(float64); !ok || f <= 0 || f > 0.5 {
			t.Errorf("%s = %#v; want seconds in (0, 0.5], until the next scan of --interval 500ms", k, answers[k])
		}
	}
	if _, ok := answers["bad_uid_path"]; ok {
		t.Errorf("get_path answered a path for a bad uid: %#v", answers["bad_uid_path"])
	}
	if bad := asSlice(answers["bad_uid"]); len(bad) != 3 {
		t.Errorf("bad uids refused = %#v; want 3 Failures", bad)
	} else {
		for _, d := range bad {
			if d := asSlice(d); len(d) != 2 || d[0] != "Rrdd_internal_error" {
				t.Errorf("bad uid ErrorDescription = %#v; want [Rrdd_internal_error, message]", d)
			}
		}
	}
	if v, ok := answers["deregister"]; !ok || v != nil {
		t.Errorf("deregister = %#v (answered: %v); want None", v, ok)
	}
	if answers["after_deregister"] != -1.0 {
		t.Errorf("next_reading after deregister = %#v; want -1", answers["after_deregister"])
	}

	// Stopped, the agent removes its socket.
	a.stop(syscall.SIGTERM)
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after the agent stopped: %v", err)
	}
}

// TestRRDDRPCRefusesLiveSocket: an agent does not take over a socket another server answers on
// (xcp-rrdd's own): it stops with an error, and the socket is left alone.
func TestRRDDRPCRefusesLiveSocket(t *testing.T) {
	serial(t)
	sock := filepath.Join(t.TempDir(), "xcp-rrdd")
	first := startAgent(t, "--rrdd-rpc", sock)
	// Killed after a minute should it run (it must exit at once), so that a regression fails.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, filepath.Join(bin, "cantal-agent"), "--listen", freePort(t), "--state-dir", t.TempDir(),
		"--rrdd-dir", t.TempDir(), "--rrdd-rpc", sock)
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "answers on it") {
		t.Errorf("a second agent on a live --rrdd-rpc socket: %v, output:\n%s\nwant an exit with an error saying another server answers", err, out)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(sock, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		t.Errorf("the first agent's socket is gone: %v", err)
	}
	if err := first.get("/api/v1/status", &struct{}{}); err != nil {
		t.Errorf("the first agent: %v", err)
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
