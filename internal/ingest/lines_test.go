package ingest

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseLinesFixture(t *testing.T) {
	body, err := os.ReadFile("testdata/write.lp")
	if err != nil {
		t.Fatal(err)
	}
	points, errs := ParseLines(body, Nanosecond, 0)
	if len(errs) != 0 {
		t.Fatalf("ParseLines(write.lp) errors: %v", errs)
	}
	type want struct {
		line int
		kind series.Kind
		val  any
		ts   int64
	}
	wants := map[string]want{
		`{"cpu":"cpu0","host":"node1","metric":"cpu.usage_user"}`:                 {2, series.Float, 12.5, 1700000000000},
		`{"cpu":"cpu0","host":"node1","metric":"cpu.usage_system"}`:               {2, series.Float, 3.25, 1700000000000},
		`{"host":"node1","interface":"eth0","metric":"net.bytes_recv"}`:           {3, series.Counter, uint64(123456789), 1700000000000},
		`{"host":"node1","interface":"eth0","metric":"net.errors"}`:               {3, series.Level, int64(0), 1700000000000},
		`{"metric":"kafka.send_bytes","subsystem":"ECS","topic":"aliecs.run"}`:    {4, series.Counter, uint64(1638400), 1746457955000},
		`{"metric":"kafka.sent_messages","subsystem":"ECS","topic":"aliecs.run"}`: {4, series.Counter, uint64(42), 1746457955000},
		`{"host":"node1","metric":"app.ready"}`:                                   {5, series.Level, int64(1), 1700000000000},
		`{"host":"node1","metric":"app.state"}`:                                   {5, series.State, "serving requests", 1700000000000},
		`{"location":"us,midwest","metric":"weather.temperature"}`:                {6, series.Float, 82.0, 1465839830100},
		`{"location":"us,midwest","metric":"weather.note"}`:                       {6, series.State, "multi\nline", 1465839830100},
	}
	if len(points) != len(wants) {
		t.Errorf("ParseLines(write.lp) = %d points; want %d", len(points), len(wants))
	}
	for _, p := range points {
		key := p.Labels().Key()
		w, ok := wants[key]
		if !ok {
			t.Errorf("unexpected point %s", key)
			continue
		}
		var got any
		if p.Kind == series.State {
			got = p.Text
		} else {
			got = series.Decode(p.Kind, p.Bits)
		}
		if p.Line != w.line || p.Kind != w.kind || got != w.val || p.TS != w.ts {
			t.Errorf("point %s = line %d %v %v ts %d; want line %d %v %v ts %d", key, p.Line, p.Kind, got, p.TS, w.line, w.kind, w.val, w.ts)
		}
	}
}

func TestParseLinesPartial(t *testing.T) {
	body := strings.Join([]string{
		"good,a=1 v=1 1000000000", // 1
		"bad,a=1 v=",              // 2: missing value
		"",                        // 3
		"good,a=2 v=2i",           // 4: no timestamp: now
		"bad2 v=1 notatime",       // 5
		"bad3,metric=x v=1",       // 6: reserved tag
		`str s="unterminated`,     // 7: runs to the end
		"never v=1",               // 8: swallowed by the open string on 7
	}, "\n")
	points, errs := ParseLines([]byte(body), Nanosecond, 5e9)
	if len(points) != 2 {
		t.Fatalf("ParseLines kept %d points; want 2 (lines 1 and 4): %+v", len(points), points)
	}
	if points[0].Line != 1 || points[0].TS != 1000 || points[1].Line != 4 || points[1].TS != 5000 {
		t.Errorf("points = %+v; want line 1 ts 1000 and line 4 ts 5000 (now)", points)
	}
	var lines []int
	for _, e := range errs {
		lines = append(lines, e.Line)
		if !strings.Contains(e.Error(), "unable to parse") {
			t.Errorf("error %q lacks InfluxDB's wording", e.Error())
		}
	}
	if want := []int{2, 5, 6, 7}; !equalInts(lines, want) {
		t.Errorf("bad lines = %v; want %v (errors %v)", lines, want, errs)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseLinesPrecision(t *testing.T) {
	for _, tc := range []struct {
		prec string
		ts   string
		ms   int64
	}{
		{"", "1700000000123456789", 1700000000123},
		{"ns", "1700000000123456789", 1700000000123},
		{"u", "1700000000123456", 1700000000123},
		{"us", "1700000000123456", 1700000000123},
		{"ms", "1700000000123", 1700000000123},
		{"s", "1700000000", 1700000000000},
		{"m", "28333333", 28333333 * 60000},
		{"h", "472222", 472222 * 3600000},
	} {
		p, err := ParsePrecision(tc.prec)
		if err != nil {
			t.Fatalf("ParsePrecision(%q): %v", tc.prec, err)
		}
		points, errs := ParseLines([]byte("m v=1 "+tc.ts), p, 0)
		if len(errs) != 0 || len(points) != 1 || points[0].TS != tc.ms {
			t.Errorf("precision %q ts %s: points %+v errs %v; want ts %d ms", tc.prec, tc.ts, points, errs, tc.ms)
		}
	}
	if _, err := ParsePrecision("d"); err == nil {
		t.Error("ParsePrecision(d) = nil error; want error")
	}
	if _, errs := ParseLines([]byte("m v=1 9223372036854775807"), Hour, 0); len(errs) != 1 {
		t.Errorf("overflowing timestamp accepted: %v", errs)
	}
}

func TestParseLinesRejects(t *testing.T) {
	for _, line := range []string{
		"m",
		"m v",
		"m,t=1,t=2 v=1",
		"m v=1,v=2",
		"m v=1i2",
		"m v=\xff",
		"m,t=\xff v=1",
		"\xff v=1",
		"m v=1 1 extra",
		"m v=1u 12x",
	} {
		points, errs := ParseLines([]byte(line), Nanosecond, 0)
		if len(points) != 0 || len(errs) != 1 || errs[0].Line != 1 {
			t.Errorf("ParseLines(%q) = %d points, errors %v; want one error on line 1", line, len(points), errs)
		}
	}
	// Floats: special values are parsed by the decoder's rules.
	points, errs := ParseLines([]byte("m v=-1.5e300"), Nanosecond, 0)
	if len(errs) != 0 || math.Float64frombits(points[0].Bits) != -1.5e300 {
		t.Errorf("ParseLines(-1.5e300) = %+v %v", points, errs)
	}
}
