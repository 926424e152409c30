package apiwire

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestNumberUnmarshal(t *testing.T) {
	for _, c := range []struct {
		in    string
		f     float64
		valid bool
		out   string // re-encoded
	}{
		{"null", 0, false, "null"},
		{"0", 0, true, "0"},
		{"-12", -12, true, "-12"},
		{"1152921504606846977", 1152921504606846977, true, "1152921504606846977"},
		{"1.5e-07", 1.5e-7, true, "1.5e-07"},
		{"1E+400", math.Inf(1), true, "1E+400"},
		{`"NaN"`, math.NaN(), true, `"NaN"`},
		{`"+Inf"`, math.Inf(1), true, `"+Inf"`},
		{`"Inf"`, math.Inf(1), true, `"+Inf"`},
		{`"-Inf"`, math.Inf(-1), true, `"-Inf"`},
	} {
		var n Number
		if err := json.Unmarshal([]byte(c.in), &n); err != nil {
			t.Errorf("Unmarshal(%s): %v", c.in, err)
			continue
		}
		same := n.F == c.f || math.IsNaN(n.F) && math.IsNaN(c.f)
		if !same || n.Valid != c.valid {
			t.Errorf("Unmarshal(%s) = %+v; want %v valid %v", c.in, n, c.f, c.valid)
		}
		if out, _ := n.MarshalJSON(); string(out) != c.out {
			t.Errorf("Unmarshal(%s) re-encoded as %s; want %s", c.in, out, c.out)
		}
	}
	for _, in := range []string{`"nan"`, `"secret"`, "nan", "inf", "0x10", "1_000", "+1", "01", "1.", ".5", "1e", "true", "[1]", `{}`, ""} {
		var n Number
		err := n.UnmarshalJSON([]byte(in))
		if err == nil {
			t.Errorf("UnmarshalJSON(%s) = %+v; want an error", in, n)
		} else if in != "" && strings.Contains(err.Error(), in) && len(in) > 3 {
			t.Errorf("UnmarshalJSON(%s): error %q quotes the input", in, err)
		}
	}
}

func TestStdFloat(t *testing.T) {
	for _, c := range []struct {
		f   float64
		out string
	}{{1e21, "1e+21"}, {1e6, "1000000"}, {1.5e-7, "1.5e-7"}, {math.NaN(), `"NaN"`}, {math.Inf(-1), `"-Inf"`}} {
		b, err := json.Marshal(StdFloat(c.f))
		if err != nil || string(b) != c.out {
			t.Errorf("Marshal(StdFloat(%v)) = %s, %v; want %s", c.f, b, err, c.out)
		}
		var back StdFloat
		if err := json.Unmarshal(b, &back); err != nil || !(float64(back) == c.f || math.IsNaN(c.f) && math.IsNaN(float64(back))) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", b, back, err, c.f)
		}
	}
}

// TestSeriesState: a state's text comes from "text", or from "value" when "text" is absent,
// and is never read as a number (a state whose text is "NaN").
func TestSeriesState(t *testing.T) {
	var s Series
	if err := json.Unmarshal([]byte(`{"labels":{"metric":"p"},"kind":"state","value":"NaN","ts":1}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Text != "NaN" || s.Value.Valid {
		t.Errorf("state = %+v; want text NaN and no number", s)
	}
	if err := json.Unmarshal([]byte(`{"labels":{},"kind":"counter","value":"many","ts":1}`), &s); err == nil {
		t.Errorf("counter with a string value decoded: %+v", s)
	}
	if err := json.Unmarshal([]byte(`[[1,2],[3]]`), &[]Point{}); err == nil {
		t.Error("point with one member decoded")
	}
	if err := json.Unmarshal([]byte(`[[1.5,2]]`), &[]Point{}); err == nil {
		t.Error("point with a fractional time decoded")
	}
}

// FuzzNumber: whatever UnmarshalJSON accepts re-encodes as valid JSON that decodes to the same
// value; what it refuses is refused with an error, never a panic.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"null", "0", "-0", "1e5", "1.5E-7", `"NaN"`, `"+Inf"`, `"Inf"`, `"-Inf"`, "1E+400",
		"18446744073709551615", `"nan"`, "0x1p3", "1_0", "Infinity", "-", "00", "1.e3", `"`, "[]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var n Number
		if err := n.UnmarshalJSON(b); err != nil {
			return
		}
		out, err := n.MarshalJSON()
		if err != nil || !json.Valid(out) {
			t.Fatalf("%q decoded to %+v, re-encoded as invalid JSON %q (%v)", b, n, out, err)
		}
		var back Number
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q: re-encoded %q does not decode: %v", b, out, err)
		}
		if back.Valid != n.Valid || !(back.F == n.F || math.IsNaN(back.F) && math.IsNaN(n.F)) {
			t.Fatalf("%q: %+v re-decoded as %+v", b, n, back)
		}
		var p Point
		p.UnmarshalJSON(append(append([]byte("[1,"), b...), ']'))
		var s Series
		s.UnmarshalJSON(append(append([]byte(`{"kind":"float","value":`), b...), '}'))
	})
}

// FuzzAnswers: any input an answer type decodes re-encodes as valid JSON that decodes again and
// re-encodes to the same bytes (the encoding is a fixed point after one round).
func FuzzAnswers(f *testing.F) {
	for _, s := range []string{
		`{"series":[{"labels":{"metric":"a<&>","pid":"1"},"kind":"counter","value":18446744073709551615,"ts":1,"rate":"NaN"},{"labels":{},"kind":"state","value":"x","ts":1,"text":"x","since":5}]}`,
		`{"series":[{"labels":{"metric":"a"},"kind":"level","fn":"rate","points":[[1,2],[3,"+Inf"],[4,1e400]]}]}`,
		`{"series":[{"labels":{"m":"\u00e9\ud800"},"kind":"float","count":1,"min":1,"max":"NaN","slope":null}]}`,
		`{"nodes":[{"node":"a","status":"ok","series":[{"labels":{"metric":"m","node":"a"},"kind":"counter","value":1,"ts":1,"rate":2}]},{"node":"b","status":"unreachable","since":4,"error":"x","series":[]}],"aggregate":[{"labels":{"metric":"m"},"kind":"counter","fn":"sum","value":1,"rate":"NaN","nodes":1}]}`,
		`{"nodes":[{"node":"a","status":"stale","since":9,"series":[{"labels":{"metric":"m"},"kind":"level","points":[[1000,1],[-3000,"-Inf"]]}]}]}`,
		`{"peers":[{"id":"x","name":"a","addr":"h:1","http":"h:1","status":"alive","rtt_ms":0.25,"last_seen":3,"since":2}]}`,
		`{"alerts":[{"name":"a","state":"firing","labels":{"x":"<"},"value":"NaN","threshold":1e21,"since_ms":1}],"truncated":["r"],"nodes":[{"node":"n","status":"ok","firing":1}]}`,
		`{"nodes":[{"node":"a","status":"ok","series":[]}],"aggregate":[{"labels":{"metric":"m"},"kind":"level","fn":"sum","series":2,"step_ms":2000,"points":[[2000,3,2,2],[4000,"NaN",1,2],[6000,1e400,0,-1]]}]}`,
		`{"processes":[{"pid":1,"ppid":0,"uid":0,"name":"a<","cmdline":["x"],"state":"S","start_time":1,"threads":1,"cpu_user":0.5,"cpu_system":0,"cpu_percent":1e21,"rss":18446744073709551615,"vsz":0,"swap":0,"read_bytes":0,"write_bytes":0,"cgroup":"/","appname":"z","metrics":true}],"total":1}`,
		`{"node_id":"a","uptime_s":1.5,"last_scan":{"ts":1,"duration_ms":2.5},"counts":{"series":3},"problems":[{"source":"s","reason":"r"}],"security":{"listeners":[{"addr":"h:1"}]},"rrdd_rpc":{"socket":"/s","plugins":[]},"remote_write":[{"name":"r","lag_s":0.5}]}`,
		`{"series":null}`, `{}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fixed(t, b, &MetricsAnswer{}, func() any { return &MetricsAnswer{} })
		fixed(t, b, &HistoryAnswer{}, func() any { return &HistoryAnswer{} })
		fixed(t, b, &StatsAnswer{}, func() any { return &StatsAnswer{} })
		fixed(t, b, &ClusterMetricsAnswer{}, func() any { return &ClusterMetricsAnswer{} })
		fixed(t, b, &ClusterHistoryAnswer{}, func() any { return &ClusterHistoryAnswer{} })
		fixed(t, b, &PeersAnswer{}, func() any { return &PeersAnswer{} })
		fixed(t, b, &AlertsAnswer{}, func() any { return &AlertsAnswer{} })
		fixed(t, b, &ProcessesAnswer{}, func() any { return &ProcessesAnswer{} })
		fixed(t, b, &Status{}, func() any { return &Status{} })
	})
}

// encode encodes v with its MarshalJSON when it has one, else with json.Marshal.
func encode(t *testing.T, v any) []byte {
	t.Helper()
	var out []byte
	var err error
	if m, ok := v.(json.Marshaler); ok {
		out, err = m.MarshalJSON()
	} else {
		out, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return out
}

// fixed decodes b into v; when it decodes, the encoding must be valid JSON that decodes into a
// fresh value whose encoding is the same.
func fixed(t *testing.T, b []byte, v any, fresh func() any) {
	t.Helper()
	if json.Unmarshal(b, v) != nil {
		return
	}
	once := encode(t, deref(v))
	if !json.Valid(once) {
		t.Fatalf("%T from %q re-encoded as invalid JSON %q", v, b, once)
	}
	w := fresh()
	if err := json.Unmarshal(once, w); err != nil {
		t.Fatalf("%T: re-encoded %q does not decode: %v", v, once, err)
	}
	if twice := encode(t, deref(w)); string(twice) != string(once) {
		t.Fatalf("%T from %q: re-encoded\n%s\nthen\n%s", v, b, once, twice)
	}
}

// deref returns the value v points to (the types' MarshalJSON have value receivers).
func deref(v any) any {
	switch p := v.(type) {
	case *MetricsAnswer:
		return *p
	case *HistoryAnswer:
		return *p
	case *StatsAnswer:
		return *p
	case *ClusterMetricsAnswer:
		return *p
	case *ClusterHistoryAnswer:
		return *p
	case *PeersAnswer:
		return *p
	case *AlertsAnswer:
		return *p
	case *ProcessesAnswer:
		return *p
	case *Status:
		return *p
	}
	return v
}
