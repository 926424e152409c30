package rrddscan

import (
	"context"
	"crypto/md5"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/rrdd"
)

// scanSink is a Recorder that also remembers which series were Put in the current scan.
type scanSink struct {
	*series.Recorder
	put map[string]uint64
}

func newSink() *scanSink { return &scanSink{Recorder: series.NewRecorder(), put: map[string]uint64{}} }

func (s *scanSink) Put(r *series.Ref, bits uint64) {
	s.Recorder.Put(r, bits)
	s.put[r.Key] = bits
}

// collect runs one scan with a fresh per-scan view.
func collect(t *testing.T, c *Collector, s *scanSink) {
	t.Helper()
	clear(s.put)
	clear(s.Problems)
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatalf("Collect: %v", err)
	}
}

func key(l series.Labels) string { return l.Key() }

func writePlugin(t *testing.T, path string, p rrdd.Protocol, dss []rrdd.Datasource, vals ...rrdd.Value) *rrdd.Writer {
	t.Helper()
	w, err := rrdd.Create(path, p, dss)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(time.Unix(1700000000, 0), vals); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestCollectDirectory(t *testing.T) {
	dir := t.TempDir()
	temp := rrdd.NewDatasource("cpu-temp-cpu0", rrdd.Float)
	temp.Units, temp.Type = "degC", rrdd.Gauge
	mem := rrdd.NewDatasource("memory_reclaimed", rrdd.Int64)
	mem.Units = "B"
	bytesIn := rrdd.NewDatasource("bytes_in", rrdd.Int64)
	bytesIn.Type, bytesIn.Owner = rrdd.Derive, "vm 0d5e-11"
	w := writePlugin(t, filepath.Join(dir, "good"), rrdd.V2, []rrdd.Datasource{temp, mem, bytesIn},
		rrdd.FloatValue(64.33), rrdd.IntValue(1<<20), rrdd.IntValue(5000))
	defer w.Close()
	old := rrdd.NewDatasource("load", rrdd.Float)
	w1 := writePlugin(t, filepath.Join(dir, "oldstyle"), rrdd.V1, []rrdd.Datasource{old}, rrdd.FloatValue(0.5))
	defer w1.Close()
	if err := os.WriteFile(filepath.Join(dir, "corrupt"), []byte("DATASOURCEX garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "good"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp-writing"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}

	c := New(dir, Options{})
	s := newSink()
	for scan := range 2 { // the second scan: unchanged file still reports, problems repeat
		collect(t, c, s)
		want := map[string]uint64{
			key(series.Labels{"metric": "cpu-temp-cpu0", "plugin": "good", "owner": "host", "units": "degC"}): math.Float64bits(64.33),
			key(series.Labels{"metric": "memory_reclaimed", "plugin": "good", "owner": "host", "units": "B"}): 1 << 20,
			key(series.Labels{"metric": "bytes_in", "plugin": "good", "owner": "vm 0d5e-11"}):                 5000,
			key(series.Labels{"metric": "load", "plugin": "oldstyle", "owner": "host"}):                       math.Float64bits(0.5),
		}
		if len(s.put) != len(want) {
			t.Errorf("scan %d: put %v; want %v", scan, s.put, want)
		}
		for k, v := range want {
			if got, ok := s.put[k]; !ok || got != v {
				t.Errorf("scan %d: %s = %#x, %v; want %#x", scan, k, got, ok, v)
			}
		}
		kinds := map[string]series.Kind{"cpu-temp-cpu0": series.Float, "memory_reclaimed": series.Level, "bytes_in": series.Counter, "load": series.Float}
		for _, ref := range s.Refs() {
			if ref.Kind != kinds[ref.Labels["metric"]] {
				t.Errorf("%s: kind %v; want %v", ref.Key, ref.Kind, kinds[ref.Labels["metric"]])
			}
		}
		for _, name := range []string{"corrupt", "link", "fifo"} {
			path := filepath.Join(dir, name)
			if len(s.Problems[path]) != 1 {
				t.Errorf("scan %d: problems of %s = %q; want one", scan, name, s.Problems[path])
			}
		}
		if len(s.Problems) != 3 {
			t.Errorf("scan %d: problems %v; want exactly corrupt, link and fifo", scan, s.Problems)
		}
	}
	for name, want := range map[string]string{"corrupt": "invalid header", "link": "symbolic link", "fifo": "not a regular file"} {
		if got := s.Problems[filepath.Join(dir, name)]; len(got) == 0 || !strings.Contains(got[0], want) {
			t.Errorf("problem of %s = %q; want it to mention %q", name, got, want)
		}
	}
	if st := c.Stats(); st.Updates != 2 || st.NoUpdates != 2 || st.Failures != 6 {
		t.Errorf("Stats = %+v; want 2 updates, 2 no-updates, 6 failures", st)
	}

	// A value update reuses the Refs; removing a file forgets it.
	if err := w.Write(time.Unix(1700000002, 0), []rrdd.Value{rrdd.FloatValue(65), rrdd.IntValue(7), rrdd.IntValue(6000)}); err != nil {
		t.Fatal(err)
	}
	nrefs := len(s.Refs())
	w1.Close()
	collect(t, c, s)
	if len(s.Refs()) != nrefs || len(s.put) != 3 {
		t.Errorf("after update: %d refs (want %d), put %v", len(s.Refs()), nrefs, s.put)
	}
	if _, ok := c.plugins["oldstyle"]; ok {
		t.Error("removed plugin file not forgotten")
	}
}

func TestCollectMissingDir(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "none"), Options{})
	s := newSink()
	collect(t, c, s)
	if len(s.put) != 0 || len(s.Problems) != 0 {
		t.Errorf("missing dir: put %v, problems %v", s.put, s.Problems)
	}
}

func TestCollectMinMax(t *testing.T) {
	dir := t.TempDir()
	g := rrdd.NewDatasource("g", rrdd.Int64)
	g.Min, g.Max = 0, 100
	f := rrdd.NewDatasource("f", rrdd.Float)
	f.Min, f.Max, f.Transform = 0, 1, rrdd.Inverse
	d := rrdd.NewDatasource("d", rrdd.Int64)
	d.Type, d.Min, d.Max = rrdd.Derive, 0, 10 // at most 10 per second
	dss := []rrdd.Datasource{g, f, d}
	now := time.Unix(1000, 0)
	c := New(dir, Options{Now: func() time.Time { return now }})
	s := newSink()
	w, err := rrdd.Create(filepath.Join(dir, "p"), rrdd.V2, dss)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	kg := key(series.Labels{"metric": "g", "plugin": "p", "owner": "host"})
	kf := key(series.Labels{"metric": "f", "plugin": "p", "owner": "host"})
	kd := key(series.Labels{"metric": "d", "plugin": "p", "owner": "host"})
	steps := []struct {
		g      int64
		f      float64
		d      int64
		wantG  bool
		wantF  bool
		wantD  bool
		fValue float64
	}{
		{50, 4, 100, true, true, true, 0.25},     // first derive sample: no rate yet
		{101, 0.5, 110, false, false, true, 0},   // g above max; 1/0.5 = 2 above max; rate 5/s
		{-1, -2, 200, false, false, false, 0},    // g below min; 1/-2 below min; rate 45/s
		{100, 1, 210, true, true, true, 1},       // bounds inclusive; rate 5/s
		{0, math.Inf(1), 0, true, true, true, 0}, // 1/Inf = 0; counter reset is not a rate
	}
	for i, st := range steps {
		if err := w.Write(time.Unix(int64(i), 0), []rrdd.Value{rrdd.IntValue(st.g), rrdd.FloatValue(st.f), rrdd.IntValue(st.d)}); err != nil {
			t.Fatal(err)
		}
		collect(t, c, s)
		now = now.Add(2 * time.Second)
		if _, ok := s.put[kg]; ok != st.wantG {
			t.Errorf("step %d: g put = %v; want %v", i, ok, st.wantG)
		}
		if v, ok := s.put[kf]; ok != st.wantF || ok && math.Float64frombits(v) != st.fValue {
			t.Errorf("step %d: f put = %v %v; want %v %v", i, ok, math.Float64frombits(v), st.wantF, st.fValue)
		}
		if v, ok := s.put[kd]; ok != st.wantD || ok && v != uint64(st.d) {
			t.Errorf("step %d: d put = %v %d; want %v", i, ok, v, st.wantD)
		}
	}
	for _, ref := range s.Refs() {
		if ref.Labels["metric"] == "f" && ref.Kind != series.Float {
			t.Errorf("inverse int64/float datasource kind %v; want float", ref.Kind)
		}
	}
}

func TestCollectTornAndBroken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p")
	w := writePlugin(t, path, rrdd.V2, []rrdd.Datasource{rrdd.NewDatasource("x", rrdd.Int64)}, rrdd.IntValue(7))
	defer w.Close()
	c := New(dir, Options{})
	s := newSink()
	collect(t, c, s)
	kx := key(series.Labels{"metric": "x", "plugin": "p", "owner": "host"})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := append([]byte(nil), good...)
	torn[len("DATASOURCES")] ^= 0xff // data checksum no longer matches
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		collect(t, c, s)
		_, put := s.put[kx]
		if wantPut := i <= 3; put != wantPut || put && s.put[kx] != 7 {
			t.Errorf("torn read %d: put %v (%d); want %v with the last good value", i, put, s.put[kx], wantPut)
		}
		if wantProblem := i > 1; (len(s.Problems[path]) > 0) != wantProblem {
			t.Errorf("torn read %d: problems %q; want problem %v", i, s.Problems[path], wantProblem)
		}
	}
	// The file recovers: values again, no problem.
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	collect(t, c, s)
	if s.put[kx] != 7 || len(s.Problems) != 0 {
		t.Errorf("after recovery: put %v, problems %v", s.put, s.Problems)
	}
	// Broken metadata: a problem every scan, no values.
	badJSON := `{"datasources": {"x": {"value": "1", "value_type": "int65"}}}`
	sum := md5.Sum([]byte(badJSON))
	broken := fmt.Sprintf("DATASOURCES\n%08x\n%x\n%s\n", len(badJSON), sum, badJSON)
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		collect(t, c, s)
		if p := s.Problems[path]; len(p) != 1 || !strings.Contains(p[0], "unknown value_type") || strings.Contains(p[0], "int65") || len(s.put) != 0 {
			t.Errorf("broken file: problems %q, put %v", s.Problems[path], s.put)
		}
	}
	// Too large: refused.
	c2 := New(dir, Options{MaxSize: 8})
	collect(t, c2, s)
	if p := s.Problems[path]; len(p) != 1 || !strings.Contains(p[0], "exceeds") {
		t.Errorf("oversized file: problems %q", p)
	}
}

func TestCollectCancelled(t *testing.T) {
	dir := t.TempDir()
	w := writePlugin(t, filepath.Join(dir, "p"), rrdd.V2, []rrdd.Datasource{rrdd.NewDatasource("x", rrdd.Int64)}, rrdd.IntValue(1))
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New(dir, Options{}).Collect(ctx, newSink()); err == nil {
		t.Error("Collect with a cancelled context returned nil")
	}
}
