package cantalv1

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// The fixture: five scans two seconds apart, ending at end, of machine series under this
// agent's names, two disks, a process's series (pid 42) and two application states.
const (
	scans  = 5
	stepMs = 2000
)

type fixtureData struct {
	reg *registry.Registry
	ts  []int64 // scan times, oldest first
	srv *Server
	hs  *httptest.Server
	// joined records POST /add_host's joins.
	joined []string
}

func fixture(t *testing.T) *fixtureData {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	ref := func(kind series.Kind, kv ...string) *series.Ref {
		l := series.Labels{}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return reg.Series(l, kind)
	}
	cpuUser := ref(series.Counter, "metric", "cpu.user_ms")
	load := ref(series.Float, "metric", "system.load_avg_1min")
	mem := ref(series.Level, "metric", "memory.MemTotal")
	sda := ref(series.Counter, "metric", "disk.read.bytes", "device", "sda")
	sdb := ref(series.Counter, "metric", "disk.read.bytes", "device", "sdb")
	estab := ref(series.Level, "metric", "tcp.sockets", "state", "established")
	listen := ref(series.Level, "metric", "tcp.sockets", "state", "listen")
	txq := ref(series.Level, "metric", "tcp.tx_queue")
	uidSock := ref(series.Level, "metric", "tcp.uid.sockets", "uid", "1000")
	procCPU := ref(series.Counter, "metric", "process.cpu.user_ms", "pid", "42", "process", "app")
	reqs := ref(series.Counter, "metric", "requests", "pid", "42")
	stA := ref(series.State, "metric", "phase", "app", "a")
	stB := ref(series.State, "metric", "phase", "app", "b")
	gappy := ref(series.Level, "metric", "gappy")
	end := time.Now().UnixMilli()
	f := &fixtureData{reg: reg}
	for i := int64(0); i < scans; i++ {
		ts := end - (scans-1-i)*stepMs
		f.ts = append(f.ts, ts)
		reg.Begin(ts)
		reg.Put(cpuUser, uint64(100000+1000*i))            // ms: +100 ticks per scan
		reg.Put(load, math.Float64bits(0.5+float64(i)/10)) // 0.5 .. 0.9
		reg.Put(mem, uint64(8<<30))                        // bytes
		reg.Put(sda, uint64(512*(1000+10*i)))              // bytes: sectors 1000, 1010, ...
		reg.Put(sdb, uint64(512*(2000+20*i)))              // sectors 2000, 2020, ...
		reg.Put(estab, uint64(7))                          //
		reg.Put(listen, uint64(3))                         //
		reg.Put(txq, uint64(11))                           //
		reg.Put(uidSock, uint64(4))                        //
		reg.Put(procCPU, uint64(500+100*i))                //
		reg.Put(reqs, []uint64{10, 20, 30, 5, 15}[i])      // restarted at scan 3
		if i != 2 {
			reg.Put(gappy, uint64(i))
		}
		reg.PutState(stA, end-60000, "running") //
		reg.PutState(stB, end-30000, []string{"starting", "starting", "running", "running", "running"}[i])
		reg.Commit()
	}
	f.srv = &Server{
		Registry: reg,
		Processes: func(context.Context) []Process {
			return []Process{{PID: 42, PPID: 1, UID: 1000, Name: "app", Cmdline: []string{"/usr/bin/app", "--port", "80"},
				State: "S", StartTime: 1_700_000_100_000, Threads: 3, CPUUser: 1.5, CPUSystem: 0.25,
				RSS: 4096, VSZ: 8192, Swap: 0, ReadBytes: 1, WriteBytes: 2, Cgroup: "system.slice/app.service"}}
		},
		Status: func(context.Context) Status {
			return Status{Version: "9.9.9", Started: time.UnixMilli(1_700_000_000_000), ScanDuration: 12 * time.Millisecond,
				BootTime: 1_700_000_000, NumPeers: 2, NumStale: 1, LastScan: end, HistoryBytes: 1234}
		},
		Peers: func() []Peer {
			return []Peer{
				{ID: "aa01", Name: "n1", Addr: "10.0.0.1:22682", Alive: true, RTT: 3 * time.Millisecond,
					LastSeen: time.UnixMilli(1_700_000_050_000), Since: time.UnixMilli(1_700_000_010_000)},
				{ID: "bb02", Name: "n2", Addr: "10.0.0.2:22682", Failing: true,
					LastSeen: time.UnixMilli(1_700_000_040_000), Since: time.UnixMilli(1_700_000_020_000)},
			}
		},
	}
	f.srv.Join = func(addr string) error {
		if addr == "10.9.9.9:1" {
			return errors.New("no answer")
		}
		f.joined = append(f.joined, addr)
		return nil
	}
	mux := http.NewServeMux()
	f.srv.Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>UI</html>") })
	f.hs = httptest.NewServer(mux)
	t.Cleanup(f.hs.Close)
	return f
}

func (f *fixtureData) do(t *testing.T, method, path, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.hs.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// decodeCBOR decodes with fxamacker/cbor into generic values: maps as map[any]any, arrays
// as []any, integers as uint64/int64, byte strings as []byte.
func decodeCBOR(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := cbor.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer is not CBOR: %v (% x)", err, b[:min(len(b), 64)])
	}
	return v
}

func field(t *testing.T, m any, name string) any {
	t.Helper()
	mm, ok := m.(map[any]any)
	if !ok {
		t.Fatalf("%T is not a map", m)
	}
	v, ok := mm[name]
	if !ok {
		t.Fatalf("no field %q in %v", name, mm)
	}
	return v
}

func arr(t *testing.T, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%T (%v) is not an array", v, v)
	}
	return a
}

// decodeKey decodes an original Key (bytes holding a CBOR text map), checking the pairs are in
// the byte order the original's BTreeMap writes them.
func decodeKey(t *testing.T, v any) map[string]string {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		t.Fatalf("key is %T, want a byte string", v)
	}
	if len(b) == 0 {
		return map[string]string{}
	}
	var m map[string]string
	if err := cbor.Unmarshal(b, &m); err != nil {
		t.Fatalf("key bytes are not a CBOR map of text: %v", err)
	}
	if !bytes.Equal(keyBytes(m), b) {
		t.Errorf("key %v bytes % x not in the original's order", m, b)
	}
	return m
}

func keyString(m map[string]string) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// TestAllMetricsAnswersOriginalKeysTypesAndUnits: /all_metrics is CBOR {"metrics": [[key,
// timestamp, value]...]} with the original's keys, value tags and units, whatever the suffix.
func TestAllMetricsAnswersOriginalKeysTypesAndUnits(t *testing.T) {
	f := fixture(t)
	for _, path := range []string{"/all_metrics", "/all_metrics.json", "/all_metrics.cbor"} {
		code, ct, b := f.do(t, "GET", path, "")
		if code != 200 || ct != "application/cbor" {
			t.Fatalf("GET %s: %d %s", path, code, ct)
		}
		got := map[string][]any{}
		for _, m := range arr(t, field(t, decodeCBOR(t, b), "metrics")) {
			e := arr(t, m)
			if len(e) != 3 {
				t.Fatalf("metric %v: want [key, ts, value]", e)
			}
			got[keyString(decodeKey(t, e[0]))] = []any{e[1], e[2]}
		}
		last := uint64(f.ts[scans-1])
		for _, c := range []struct {
			key  string
			want []any // [tag, value]
		}{
			{`{"metric":"cpu.user"}`, []any{uint64(1), uint64(10400)}}, // 104 000 ms in ticks
			{`{"metric":"load_avg_1min"}`, []any{uint64(3), 0.9}},
			{`{"metric":"memory.MemTotal"}`, []any{uint64(2), uint64(8 << 30)}},
			{`{"device":"sda","metric":"disk.read.sectors"}`, []any{uint64(1), uint64(1040)}},
			{`{"metric":"net.tcp.established"}`, []any{uint64(2), uint64(7)}},
			{`{"metric":"net.tcp.listening"}`, []any{uint64(2), uint64(3)}},
			{`{"metric":"net.tcp.tx_queue"}`, []any{uint64(2), uint64(11)}},
			{`{"metric":"requests","pid":"42"}`, []any{uint64(1), uint64(15)}},
		} {
			e, ok := got[c.key]
			if !ok {
				t.Errorf("GET %s: no %s among %d metrics", path, c.key, len(got))
				continue
			}
			if e[0] != last {
				t.Errorf("%s: timestamp %v; want %d", c.key, e[0], last)
			}
			if v := arr(t, e[1]); !reflect.DeepEqual(v, c.want) {
				t.Errorf("%s: value %#v; want %#v", c.key, v, c.want)
			}
		}
		st := arr(t, got[`{"app":"b","metric":"phase"}`][1])
		if len(st) != 2 || st[0] != uint64(0) || !reflect.DeepEqual(st[1], []any{uint64(f.ts[scans-1] - 30000), "running"}) {
			t.Errorf("state: %#v; want [0, [since, \"running\"]]", st)
		}
		if _, ok := got[`{"metric":"cpu.user_ms"}`]; ok {
			t.Errorf("cpu.user_ms under our name too")
		}
	}
}

// query posts body to /query and returns the decoded {"values": ...} map.
func (f *fixtureData) query(t *testing.T, body string) map[any]any {
	t.Helper()
	code, ct, b := f.do(t, "POST", "/query.cbor", body)
	if code != 200 || ct != "application/cbor" {
		t.Fatalf("POST /query.cbor: %d %s %s", code, ct, b)
	}
	vals, ok := field(t, decodeCBOR(t, b), "values").(map[any]any)
	if !ok {
		t.Fatalf("values is not a map")
	}
	return vals
}

func rule(source, cond, extract, functions string) string {
	return `{"series": {"source": "` + source + `", "condition": ` + cond + `}, "extract": ` + extract + `, "functions": ` + functions + `}`
}

func u64s(ts []int64) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = uint64(t)
	}
	return out
}

func reversed(ts []int64) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[len(ts)-1-i] = t
	}
	return out
}

// TestQueryHistoryByNumAnswersMultiSeries: Fine + HistoryByNum gives [101, [[key, chunk,
// timestamps]...]], newest first, chunks in the original's types and units.
func TestQueryHistoryByNumAnswersMultiSeries(t *testing.T) {
	f := fixture(t)
	vals := f.query(t, `{"rules": {"disks": `+rule("Fine", `["Eq", "metric", "disk.read.sectors"]`, `["HistoryByNum", 3]`, `[]`)+`,
		"load": `+rule("Fine", `["Eq", "metric", "load_avg_1min"]`, `["HistoryByNum", 100]`, `[]`)+`}}`)
	d := arr(t, vals["disks"])
	if d[0] != uint64(dsMultiSeries) {
		t.Fatalf("disks: tag %v; want 101", d[0])
	}
	items := arr(t, d[1])
	if len(items) != 2 {
		t.Fatalf("disks: %d series; want 2", len(items))
	}
	wantTS := u64s(reversed(f.ts)[:3])
	byDev := map[string][]any{}
	for _, it := range items {
		e := arr(t, it)
		k := decodeKey(t, e[0])
		byDev[k["device"]] = e
		if !reflect.DeepEqual(e[2], wantTS) {
			t.Errorf("%v: timestamps %v; want %v", k, e[2], wantTS)
		}
	}
	if got, want := byDev["sda"][1], []any{uint64(1), []any{uint64(1040), uint64(1030), uint64(1020)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sda chunk %v; want %v", got, want)
	}
	l := arr(t, arr(t, arr(t, vals["load"])[1])[0])
	chunk := arr(t, l[1])
	if chunk[0] != uint64(3) || len(arr(t, chunk[1])) != scans || arr(t, chunk[1])[0] != 0.9 {
		t.Errorf("load chunk %v; want [3, [0.9 ... 0.5]] (only the %d points kept)", chunk, scans)
	}
}

// TestQueryTipAndDiffToAtMost: Tip and DiffToAtMost give MultiTip [201, [[key, value, [t0,
// t1]]...]]; the difference is to the value n points back counting the tip, over that slice.
func TestQueryTipAndDiffToAtMost(t *testing.T) {
	f := fixture(t)
	vals := f.query(t, `{"rules": {"tip": `+rule("Fine", `["Eq", "metric", "cpu.user"]`, `["Tip"]`, `[]`)+`,
		"diff": `+rule("Fine", `["Eq", "metric", "cpu.user"]`, `["DiffToAtMost", 3]`, `[]`)+`}}`)
	last, back3 := uint64(f.ts[scans-1]), uint64(f.ts[scans-4])
	tip := arr(t, arr(t, arr(t, vals["tip"])[1])[0])
	if decodeKey(t, tip[0])["metric"] != "cpu.user" || !reflect.DeepEqual(tip[1], []any{uint64(1), uint64(10400)}) ||
		!reflect.DeepEqual(tip[2], []any{last, last}) {
		t.Errorf("tip %v", tip)
	}
	d := arr(t, arr(t, arr(t, vals["diff"])[1])[0])
	if !reflect.DeepEqual(d[1], []any{uint64(1), uint64(300)}) || !reflect.DeepEqual(d[2], []any{last, back3}) {
		t.Errorf("diff %v; want [1, 300] over [%d, %d] (3 scans back)", d, last, back3)
	}
	// Up to n back: 10 scans back from 5 points is the oldest; 0 back leaves every series out.
	vals = f.query(t, `{"rules": {"far": `+rule("Fine", `["Eq", "metric", "cpu.user"]`, `["DiffToAtMost", 10]`, `[]`)+`,
		"zero": `+rule("Fine", `["Eq", "metric", "cpu.user"]`, `["DiffToAtMost", 0]`, `[]`)+`}}`)
	if d := arr(t, arr(t, arr(t, vals["far"])[1])[0]); !reflect.DeepEqual(d[1], []any{uint64(1), uint64(400)}) || !reflect.DeepEqual(d[2], []any{last, uint64(f.ts[0])}) {
		t.Errorf("diff 10 back %v; want [1, 400] over the oldest point", d)
	}
	if z := arr(t, vals["zero"]); len(arr(t, z[1])) != 0 {
		t.Errorf("diff 0 back %v; want an empty MultiTip", z)
	}
}

// TestQuerySumAndSumBy: Sum of several series is SingleSeries under the empty key; SumBy groups
// by a label, keyed {label: value}, the total last under the empty key; sums of tips too.
func TestQuerySumAndSumBy(t *testing.T) {
	f := fixture(t)
	vals := f.query(t, `{"rules": {
		"sum": `+rule("Fine", `["Eq", "metric", "disk.read.sectors"]`, `["HistoryByNum", 2]`, `[["Sum", "Ignore"]]`)+`,
		"by": `+rule("Fine", `["Eq", "metric", "disk.read.sectors"]`, `["HistoryByNum", 2]`, `[["SumBy", "device", "Ignore", true]]`)+`,
		"tipsum": `+rule("Fine", `["Eq", "metric", "disk.read.sectors"]`, `["Tip"]`, `[["Sum", "Ignore"]]`)+`,
		"mixed": `+rule("Fine", `["Or", ["Eq", "metric", "load_avg_1min"], ["Eq", "metric", "cpu.user"]]`, `["Tip"]`, `[["Sum", "Ignore"]]`)+`,
		"none": `+rule("Fine", `["Eq", "metric", "nothing"]`, `["Tip"]`, `[["Sum", "Ignore"]]`)+`}}`)
	s := arr(t, vals["sum"])
	ts2 := u64s(reversed(f.ts)[:2])
	if s[0] != uint64(dsSingleSeries) || len(decodeKey(t, s[1])) != 0 ||
		!reflect.DeepEqual(s[2], []any{uint64(1), []any{uint64(1040 + 2080), uint64(1030 + 2060)}}) || !reflect.DeepEqual(s[3], ts2) {
		t.Errorf("sum %v", s)
	}
	by := arr(t, vals["by"])
	items := arr(t, by[1])
	if by[0] != uint64(dsMultiSeries) || len(items) != 3 {
		t.Fatalf("sumby %v; want 3 series (sda, sdb, total)", by)
	}
	for i, want := range []struct {
		key string
		v   uint64
	}{{`{"device":"sda"}`, 1040}, {`{"device":"sdb"}`, 2080}, {`{}`, 3120}} {
		e := arr(t, items[i])
		if k := keyString(decodeKey(t, e[0])); k != want.key || arr(t, arr(t, e[1])[1])[0] != want.v {
			t.Errorf("sumby[%d] = %s %v; want %s %d", i, k, e[1], want.key, want.v)
		}
	}
	ts := arr(t, vals["tipsum"])
	last := uint64(f.ts[scans-1])
	if ts[0] != uint64(dsSingleTip) || !reflect.DeepEqual(ts[2], []any{uint64(1), uint64(3120)}) || !reflect.DeepEqual(ts[3], []any{last, last}) {
		t.Errorf("tip sum %v", ts)
	}
	if m := arr(t, vals["mixed"]); !reflect.DeepEqual(m, []any{uint64(dsIncompatible), []any{uint64(conflictDissimilar)}}) {
		t.Errorf("sum of a counter and a float %v; want Incompatible(Dissimilar)", m)
	}
	if n := arr(t, vals["none"]); !reflect.DeepEqual(n, []any{uint64(dsEmpty)}) {
		t.Errorf("sum of nothing %v; want [998]", n)
	}
}

// TestQueryNonNegativeDerivative: per second between consecutive points at the newer one's
// time, n-1 values; a counter's decrease (reset) gives null; on tips it is CantDerive.
func TestQueryNonNegativeDerivative(t *testing.T) {
	f := fixture(t)
	vals := f.query(t, `{"rules": {
		"d": `+rule("Fine", `["Eq", "metric", "requests"]`, `["HistoryByNum", 5]`, `[["NonNegativeDerivative"]]`)+`,
		"tip": `+rule("Fine", `["Eq", "metric", "requests"]`, `["Tip"]`, `[["NonNegativeDerivative"]]`)+`}}`)
	e := arr(t, arr(t, arr(t, vals["d"])[1])[0])
	// values newest first 15, 5, 30, 20, 10 two seconds apart.
	want := []any{uint64(3), []any{5.0, nil, 5.0, 5.0}}
	if !reflect.DeepEqual(e[1], want) || !reflect.DeepEqual(e[2], u64s(reversed(f.ts)[:4])) {
		t.Errorf("derivative %v at %v; want %v", e[1], e[2], want)
	}
	if tip := arr(t, vals["tip"]); !reflect.DeepEqual(tip, []any{uint64(dsIncompatible), []any{uint64(conflictCantDerive)}}) {
		t.Errorf("derivative of tips %v; want Incompatible(CantDerive)", tip)
	}
}

// TestQueryTipSourceStatesAndStateChart: source Tip selects the states, [0, [since, text]]; the
// StateChart function counts them by text.
func TestQueryTipSourceStatesAndStateChart(t *testing.T) {
	f := fixture(t)
	vals := f.query(t, `{"rules": {
		"st": `+rule("Tip", `["Eq", "metric", "phase"]`, `["Tip"]`, `[]`)+`,
		"chart": `+rule("Tip", `["Has", "app"]`, `["Tip"]`, `[["StateChart", 5], ["Expect", ["Chart"]]]`)+`,
		"bad": `+rule("Tip", `["Has", "app"]`, `["Tip"]`, `[["Expect", ["MultiSeries", "Counter"]]]`)+`}}`)
	items := arr(t, arr(t, vals["st"])[1])
	if len(items) != 2 {
		t.Fatalf("states: %v", items)
	}
	for _, it := range items {
		e := arr(t, it)
		v := arr(t, e[1])
		if v[0] != uint64(0) || arr(t, v[1])[1] != "running" {
			t.Errorf("state %v; want [0, [since, \"running\"]]", v)
		}
	}
	if c := arr(t, vals["chart"]); c[0] != uint64(dsChart) || !reflect.DeepEqual(c[1], map[any]any{"running": uint64(2)}) {
		t.Errorf("chart %v; want [300, {running: 2}]", c)
	}
	if b := arr(t, vals["bad"]); b[0] != uint64(dsIncompatible) {
		t.Errorf("unmet Expect %v; want Incompatible", b)
	}
}

// TestQueryConditions: each condition of the language selects what the original's matches does.
func TestQueryConditions(t *testing.T) {
	l := map[string]string{"metric": "disk.read.sectors", "device": "sda"}
	for _, c := range []struct {
		cond string
		want bool
	}{
		{`["Eq", "device", "sda"]`, true},
		{`["Eq", "device", "sdb"]`, false},
		{`["Eq", "pid", ""]`, false},
		{`["NotEq", "device", "sdb"]`, true},
		{`["NotEq", "pid", "1"]`, false}, // no such label: false, as the original
		{`["RegexLike", "metric", "^disk\\."]`, true},
		{`["RegexLike", "metric", "sectors"]`, true}, // unanchored
		{`["RegexLike", "pid", ".*"]`, false},
		{`["And", ["Has", "device"], ["Eq", "device", "sda"]]`, true},
		{`["And", ["Has", "device"], ["Has", "pid"]]`, false},
		{`["Or", ["Has", "pid"], ["Eq", "device", "sda"]]`, true},
		{`["Not", ["Has", "pid"]]`, true},
		{`["Has", "metric"]`, true},
	} {
		q, err := ParseQuery([]byte(`{"rules": {"r": ` + rule("Fine", c.cond, `["Tip"]`, `[]`) + `}}`))
		if err != nil {
			t.Errorf("%s: %v", c.cond, err)
			continue
		}
		if got := q.Rules["r"].Cond.Match(l); got != c.want {
			t.Errorf("%s on %v = %v; want %v", c.cond, l, got, c.want)
		}
	}
	// The original's tuple-struct Filter and rustc_serialize's object form of a unit variant.
	q, err := ParseQuery([]byte(`{"rules": {"r": {"series": [{"variant": "Fine", "fields": []}, ["Has", "device"]], "extract": ["Tip"], "functions": []}}}`))
	if err != nil || !q.Rules["r"].Fine {
		t.Errorf("array filter: %v", err)
	}
}

// TestQueryBadBodiesGetClearErrors: a body the language does not have is a 400 naming what is
// wrong, nothing else answered.
func TestQueryBadBodiesGetClearErrors(t *testing.T) {
	f := fixture(t)
	for _, c := range []struct{ body, want string }{
		{`not json`, "body"},
		{`{}`, `missing "rules"`},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ["Eq", "a"]}, "extract": ["Tip"], "functions": []}}}`, "bad tuple length for Eq"},
		{`{"rules": {"r": {"series": {"source": "Coarse", "condition": ["Has", "a"]}, "extract": ["Tip"], "functions": []}}}`, `unknown "Coarse"`},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ["RegexLike", "a", "("]}, "extract": ["Tip"], "functions": []}}}`, "invalid regex"},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ["Has", "a"]}, "extract": ["HistoryByNum", -1], "functions": []}}}`, "non-negative integer"},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ["Has", "a"]}, "extract": ["HistoryByNum", 1.5], "functions": []}}}`, "non-negative integer"},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ["Has", "a"]}, "extract": ["Tip"], "functions": [["Sum", "Keep"]]}}}`, "Ignore"},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ["Has", "a"]}, "extract": ["Tip"]}}}`, "required"},
		{`{"rules": {"r": {"series": {"source": "Fine", "condition": ` + strings.Repeat(`["Not", `, 40) + `["Has", "a"]` + strings.Repeat(`]`, 40) + `}, "extract": ["Tip"], "functions": []}}}`, "nested deeper"},
	} {
		code, _, b := f.do(t, "POST", "/query", c.body)
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		if code != 400 || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: %d %s; want 400 with %q", c.body, code, b, c.want)
		}
	}
	if code, _, _ := f.do(t, "GET", "/query", ""); code != 405 {
		t.Errorf("GET /query: %d; want 405", code)
	}
}

// TestQueryRefusesOverLimits: a rule selecting more series than MaxSeries, or an answer over
// MaxPoints values, is refused with 400 naming the limit.
func TestQueryRefusesOverLimits(t *testing.T) {
	f := fixture(t)
	f.srv.Limits = Limits{MaxSeries: 3, MaxPoints: 8}
	code, _, b := f.do(t, "POST", "/query", `{"rules": {"all": `+rule("Fine", `["Has", "metric"]`, `["Tip"]`, `[]`)+`}}`)
	if code != 400 || !strings.Contains(string(b), "more than 3 series") {
		t.Errorf("too many series: %d %s", code, b)
	}
	code, _, b = f.do(t, "POST", "/query", `{"rules": {"h": `+rule("Fine", `["Eq", "metric", "disk.read.sectors"]`, `["HistoryByNum", 5]`, `[]`)+`}}`)
	if code != 400 || !strings.Contains(string(b), "query limit") {
		t.Errorf("too many points: %d %s", code, b)
	}
	code, _, _ = f.do(t, "POST", "/query", `{"rules": {"h": `+rule("Fine", `["Eq", "metric", "disk.read.sectors"]`, `["HistoryByNum", 4]`, `[]`)+`}}`)
	if code != 200 {
		t.Errorf("8 points: %d; want 200 (the limit holds them)", code)
	}
	code, _, _ = f.do(t, "POST", "/query", strings.Repeat(" ", maxBody+1))
	if code != 413 {
		t.Errorf("body over %d bytes: %d; want 413", maxBody, code)
	}
}

// TestOriginalRoutesHideWhatTheCallerMayNotSee: with a Visible predicate hiding process series
// (a caller that may not see pid 42), neither /all_metrics nor /query shows them.
func TestOriginalRoutesHideWhatTheCallerMayNotSee(t *testing.T) {
	f := fixture(t)
	f.srv.Visible = func(context.Context) func(series.Labels) bool {
		return func(l series.Labels) bool { _, ok := l["pid"]; return !ok }
	}
	_, _, b := f.do(t, "GET", "/all_metrics", "")
	for _, m := range arr(t, field(t, decodeCBOR(t, b), "metrics")) {
		if k := decodeKey(t, arr(t, m)[0]); k["pid"] != "" {
			t.Errorf("/all_metrics shows %v", k)
		}
	}
	vals := f.query(t, `{"rules": {"p": `+rule("Fine", `["Has", "pid"]`, `["Tip"]`, `[]`)+`}}`)
	if items := arr(t, arr(t, vals["p"])[1]); len(items) != 0 {
		t.Errorf("/query shows %d process series", len(items))
	}
}

// TestStatusProcessesSocketsPeersShapes: the JSON routes answer the original's fields and
// types, the same in .cbor (decoded) and .gron.
func TestStatusProcessesSocketsPeersShapes(t *testing.T) {
	f := fixture(t)
	getJSON := func(path string) map[string]any {
		code, ct, b := f.do(t, "GET", path, "")
		if code != 200 || ct != "application/json" {
			t.Fatalf("GET %s: %d %s", path, code, ct)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return m
	}
	st := getJSON("/status")
	for k, want := range map[string]any{"version": "9.9.9", "startup_time": 1.7e12, "scan_duration": 12.0, "boot_time": 1.7e9,
		"num_peers": 2.0, "num_stale": 1.0} {
		if st[k] != want {
			t.Errorf("status %s = %v; want %v", k, st[k], want)
		}
	}
	if s, ok := st["storage"].(map[string]any); !ok || s["size"] != 1234.0 || s["timestamp"] != float64(f.ts[scans-1]) {
		t.Errorf("status storage %v", st["storage"])
	}
	for _, k := range []string{"self_report", "threads_report"} {
		if _, ok := st[k].(map[string]any); !ok {
			t.Errorf("status %s = %v; want an object", k, st[k])
		}
	}
	pr := getJSON("/all_processes.json")
	all, _ := pr["all"].([]any)
	if pr["boot_time"] != 1.7e9 || len(all) != 1 {
		t.Fatalf("processes %v", pr)
	}
	want := map[string]any{"pid": 42.0, "ppid": 1.0, "uid": 1000.0, "gid": 0.0, "name": "app", "state": "S", "vsize": 8192.0,
		"rss": 4096.0, "swap": 0.0, "num_threads": 3.0, "start_time": 10000.0, "start_timestamp": 1_700_000_100_000.0,
		"user_time": 150.0, "system_time": 25.0, "child_user_time": 0.0, "child_system_time": 0.0,
		"cmdline": "/usr/bin/app --port 80", "read_bytes": 1.0, "write_bytes": 2.0, "cgroup": "system.slice/app.service"}
	if !reflect.DeepEqual(all[0], want) {
		t.Errorf("process %v;\nwant %v", all[0], want)
	}
	so := getJSON("/all_sockets")
	g, _ := so["global"].(map[string]any)
	if bs, _ := g["by_state"].(map[string]any); bs["ESTABLISHED"] != 7.0 || bs["LISTEN"] != 3.0 || g["tx_queue"] != 11.0 {
		t.Errorf("sockets global %v", g)
	}
	if u, _ := so["by_user"].(map[string]any)["1000"].(map[string]any); u == nil || u["by_state"].(map[string]any)["TOTAL"] != 4.0 {
		t.Errorf("sockets by_user %v", so["by_user"])
	}
	peers, _ := getJSON("/all_peers")["peers"].([]any)
	if len(peers) != 2 {
		t.Fatalf("peers %v", peers)
	}
	p0 := peers[0].(map[string]any)
	for k, want := range map[string]any{"id": "aa01", "known_since": 1_700_000_010_000.0, "is_failing": false, "primary_addr": "10.0.0.1:22682",
		"addresses": []any{"10.0.0.1:22682"}, "hostname": "n1", "name": "n1", "report": 1_700_000_050_000.0, "peers": 2.0,
		"has_remote": true, "roundtrip": 3.0, "random_peer_roundtrip": nil, "probes_sent": 0.0} {
		if !reflect.DeepEqual(p0[k], want) {
			t.Errorf("peer %s = %v; want %v", k, p0[k], want)
		}
	}
	if len(p0) != 18 {
		t.Errorf("peer has %d fields; the original's has 18: %v", len(p0), p0)
	}
	remote, _ := getJSON("/peers_with_remote")["peers"].([]any)
	if len(remote) != 1 || remote[0].(map[string]any)["id"] != "aa01" {
		t.Errorf("peers_with_remote %v; want the alive peer only", remote)
	}
	// .cbor: the same object, decoded with a real CBOR library.
	code, ct, b := f.do(t, "GET", "/status.cbor", "")
	if code != 200 || ct != "application/cbor" {
		t.Fatalf("GET /status.cbor: %d %s", code, ct)
	}
	cs := decodeCBOR(t, b)
	if field(t, cs, "version") != "9.9.9" || field(t, cs, "num_peers") != uint64(2) || field(t, field(t, cs, "storage"), "size") != uint64(1234) {
		t.Errorf("status.cbor %v", cs)
	}
	_, _, b = f.do(t, "GET", "/all_processes.cbor", "")
	if p := arr(t, field(t, decodeCBOR(t, b), "all"))[0]; field(t, p, "cmdline") != "/usr/bin/app --port 80" || field(t, p, "user_time") != uint64(150) {
		t.Errorf("all_processes.cbor %v", p)
	}
	// .gron
	code, ct, b = f.do(t, "GET", "/all_peers.gron", "")
	if code != 200 || ct != "text/x-gron" || !bytes.Contains(b, []byte("json.peers[0].id = \"aa01\";\n")) || !bytes.HasPrefix(b, []byte("json = {};\njson.peers = [];\n")) {
		t.Errorf("all_peers.gron: %d %s\n%s", code, ct, b)
	}
	// Every path Register serves answers itself, never the fallback; other paths still reach it.
	for _, p := range Paths() {
		method := "GET"
		if strings.HasPrefix(p, "/query") || strings.HasPrefix(p, "/add_host") {
			method = "POST"
		}
		if _, _, b := f.do(t, method, p, `{"rules": {}, "addr": "10.0.0.9:1"}`); strings.Contains(string(b), "<html>") {
			t.Errorf("%s %s reached the fallback", method, p)
		}
	}
	if _, _, b := f.do(t, "GET", "/status.html", ""); string(b) != "<html>UI</html>" {
		t.Errorf("/status.html: %s", b)
	}
	if _, ct, _ := f.do(t, "GET", "/all_metrics", ""); ct == "" || strings.Contains(ct, "html") {
		t.Errorf("/all_metrics served %s", ct)
	}
}

// TestAddHostJoinsThePeer: POST /add_host {"addr": "ip:port"} joins it and answers {"ok": true};
// a host name, a bad port or a failed join is an error, as is a GET.
func TestAddHostJoinsThePeer(t *testing.T) {
	f := fixture(t)
	code, ct, b := f.do(t, "POST", "/add_host.json", `{"addr": "10.0.0.3:22682"}`)
	if code != 200 || ct != "application/json" || strings.TrimSpace(string(b)) != `{"ok":true}` || !reflect.DeepEqual(f.joined, []string{"10.0.0.3:22682"}) {
		t.Errorf("add_host: %d %s %s, joined %v", code, ct, b, f.joined)
	}
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"addr": "example.com:22682"}`, 400},
		{`{"addr": "10.0.0.3"}`, 400},
		{`{"addr": "10.0.0.3:0"}`, 400},
		{`{"addr": "10.9.9.9:1"}`, 502},
		{`[`, 400},
	} {
		if code, _, b := f.do(t, "POST", "/add_host", c.body); code != c.code {
			t.Errorf("add_host %s: %d %s; want %d", c.body, code, b, c.code)
		}
	}
	if len(f.joined) != 1 {
		t.Errorf("joined %v after refused bodies", f.joined)
	}
	if code, _, _ := f.do(t, "GET", "/add_host", ""); code != 405 {
		t.Errorf("GET /add_host: %d", code)
	}
	f.srv.Join = nil
	if code, _, _ := f.do(t, "POST", "/add_host", `{"addr": "10.0.0.3:22682"}`); code != 409 {
		t.Errorf("add_host without gossip: %d; want 409", code)
	}
}

// TestQueryHistoryByTimeAndAlignment: HistoryByTime keeps the points back to the first one at
// least the window older than the newest; series are aligned on the timestamps they share, a
// series missing a scan having null there.
func TestQueryHistoryByTimeAndAlignment(t *testing.T) {
	f := fixture(t)
	vals := f.query(t, `{"rules": {
		"t0": `+rule("Fine", `["Eq", "metric", "load_avg_1min"]`, `["HistoryByTime", 0]`, `[]`)+`,
		"t3": `+rule("Fine", `["Eq", "metric", "load_avg_1min"]`, `["HistoryByTime", 3000]`, `[]`)+`,
		"t4": `+rule("Fine", `["Eq", "metric", "load_avg_1min"]`, `["HistoryByTime", 4000]`, `[]`)+`,
		"gap": `+rule("Fine", `["Or", ["Eq", "metric", "gappy"], ["Eq", "metric", "memory.MemTotal"]]`, `["HistoryByNum", 5]`, `[["SumBy", "metric", "Ignore", false]]`)+`}}`)
	newest := reversed(f.ts)
	for name, n := range map[string]int{"t0": 1, "t3": 3, "t4": 3} {
		e := arr(t, arr(t, arr(t, vals[name])[1])[0])
		if !reflect.DeepEqual(e[2], u64s(newest[:n])) {
			t.Errorf("%s: timestamps %v; want the %d newest", name, e[2], n)
		}
	}
	items := arr(t, arr(t, vals["gap"])[1])
	if len(items) != 2 {
		t.Fatalf("gap: %v", items)
	}
	g := arr(t, items[0]) // "gappy" sorts first
	if k := decodeKey(t, g[0]); k["metric"] != "gappy" {
		t.Fatalf("gap: first series %v", k)
	}
	if want := []any{uint64(2), []any{uint64(4), uint64(3), nil, uint64(1), uint64(0)}}; !reflect.DeepEqual(g[1], want) || !reflect.DeepEqual(g[2], u64s(newest)) {
		t.Errorf("gappy: %v at %v; want %v (null where it missed a scan)", g[1], g[2], want)
	}
}

// TestKeyMappingTable: each row of docs/original-api.md's key table maps as it says.
func TestKeyMappingTable(t *testing.T) {
	for _, c := range []struct {
		ours  series.Labels
		kind  series.Kind
		bits  uint64
		want  string // the original's key as JSON
		typ   int
		value uint64 // the original's value (integers and counters)
	}{
		{series.Labels{"metric": "system.uptime_s"}, series.Float, math.Float64bits(12.5), `{"metric":"uptime"}`, typFloat, 12},
		{series.Labels{"metric": "system.idle_s"}, series.Float, math.Float64bits(3), `{"metric":"idle_time"}`, typFloat, 3},
		{series.Labels{"metric": "system.load_avg_15min"}, series.Float, math.Float64bits(1), `{"metric":"load_avg_15min"}`, typFloat, 1},
		{series.Labels{"metric": "system.tasks_runnable"}, series.Level, 4, `{"metric":"proc_runnable"}`, typCounter, 4},
		{series.Labels{"metric": "system.tasks_total"}, series.Level, 400, `{"metric":"proc_total"}`, typCounter, 400},
		{series.Labels{"metric": "cpu.guest_nice_ms"}, series.Counter, 12340, `{"metric":"cpu.guest_nice"}`, typCounter, 1234},
		{series.Labels{"metric": "cpu.user_ms", "cpu": "0"}, series.Counter, 12340, `{"cpu":"0","metric":"cpu.user_ms"}`, typCounter, 12340},
		{series.Labels{"metric": "memory.MemFree"}, series.Level, 4096, `{"metric":"memory.MemFree"}`, typInteger, 4096},
		{series.Labels{"metric": "net.interface.rx.errors", "interface": "eth0"}, series.Counter, 5, `{"interface":"eth0","metric":"net.interface.rx.errs"}`, typCounter, 5},
		{series.Labels{"metric": "net.interface.tx.collisions", "interface": "eth0"}, series.Counter, 6, `{"interface":"eth0","metric":"net.interface.tx.colls"}`, typCounter, 6},
		{series.Labels{"metric": "net.interface.rx.bytes", "interface": "eth0"}, series.Counter, 7, `{"interface":"eth0","metric":"net.interface.rx.bytes"}`, typCounter, 7},
		{series.Labels{"metric": "disk.write.bytes", "device": "sda"}, series.Counter, 5120, `{"device":"sda","metric":"disk.write.sectors"}`, typCounter, 10},
		{series.Labels{"metric": "disk.read.time_ms", "device": "sda"}, series.Counter, 9, `{"device":"sda","metric":"disk.read.time"}`, typCounter, 9},
		{series.Labels{"metric": "disk.io_time_ms", "device": "sda"}, series.Counter, 9, `{"device":"sda","metric":"disk.time"}`, typCounter, 9},
		{series.Labels{"metric": "disk.weighted_io_time_ms", "device": "sda"}, series.Counter, 9, `{"device":"sda","metric":"disk.weighted_time"}`, typCounter, 9},
		{series.Labels{"metric": "disk.read.ops", "device": "sda"}, series.Counter, 9, `{"device":"sda","metric":"disk.read.ops"}`, typCounter, 9},
		{series.Labels{"metric": "disk.in_progress", "device": "sda"}, series.Level, 2, `{"device":"sda","metric":"disk.in_progress"}`, typInteger, 2},
		{series.Labels{"metric": "tcp.sockets", "state": "close_wait"}, series.Level, 1, `{"metric":"net.tcp.close_wait"}`, typInteger, 1},
		{series.Labels{"metric": "tcp.sockets", "state": "time_wait"}, series.Level, 1, `{"metric":"net.tcp.time_wait"}`, typInteger, 1},
		{series.Labels{"metric": "tcp.sockets", "state": "syn_sent"}, series.Level, 1, `{"metric":"tcp.sockets","state":"syn_sent"}`, typInteger, 1},
		{series.Labels{"metric": "tcp.rx_queue"}, series.Level, 8, `{"metric":"net.tcp.rx_queue"}`, typInteger, 8},
		{series.Labels{"metric": "tcp.listen.established", "port": "80"}, series.Level, 3, `{"metric":"net.tcp.passive.established","port":"80"}`, typInteger, 3},
		{series.Labels{"metric": "net.TcpExt.ListenDrops"}, series.Counter, 3, `{"metric":"net.TcpExt.ListenDrops"}`, typCounter, 3},
		{series.Labels{"metric": "requests", "pid": "7", "appname": "x"}, series.Counter, 3, `{"appname":"x","metric":"requests","pid":"7"}`, typCounter, 3},
	} {
		k := mapKey(c.ours, c.kind).withBytes()
		var m map[string]string
		if err := cbor.Unmarshal(k.bytes, &m); err != nil {
			t.Fatalf("%v: key bytes: %v", c.ours, err)
		}
		if got := keyString(m); got != c.want || keyString(k.labels) != c.want {
			t.Errorf("%v: key %s (labels %v); want %s", c.ours, got, k.labels, c.want)
		}
		v := k.convert(c.kind, c.bits)
		if v.typ != c.typ || (c.typ != typFloat && v.u != c.value) || (c.typ == typFloat && uint64(v.f) != c.value) {
			t.Errorf("%v: value %+v; want type %d value %d", c.ours, v, c.typ, c.value)
		}
	}
}
