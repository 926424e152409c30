package metrics

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantal-go/cantal/shm"
)

// readMirror reads the published files back with the shm reader, by "metric" label.
func readMirror(t *testing.T, base string) map[string]any {
	t.Helper()
	meta, err := os.ReadFile(base + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(base + ".values")
	if err != nil {
		t.Fatal(err)
	}
	l, err := shm.ParseMeta(base+".meta", meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CheckValues(values); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, e := range l.Entries {
		switch e.Kind {
		case shm.KindLevel:
			out[e.Labels["metric"]] = e.Level(values)
		case shm.KindFloat:
			out[e.Labels["metric"]] = e.Float(values)
		default:
			t.Errorf("entry %v has kind %v; want level or float", e.Labels, e.Kind)
		}
	}
	return out
}

func TestMirror(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	reg := NewRegistry()
	c := NewCounter("requests")
	c.Add(5)
	c.Dec()
	tm := NewTimer("latency", Milliseconds, WithWindow(time.Hour, 0))
	tm.Observe(10 * time.Millisecond)
	failing := NewGaugeFunc("broken", func(context.Context) (float64, error) { return 0, errors.New("down") })
	for _, m := range []Metric{c, tm, failing} {
		if err := reg.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	mir := NewMirror(reg, shm.Options{Path: base})
	if err := mir.Update(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mir.Path() != base {
		t.Errorf("Path() = %q; want %q", mir.Path(), base)
	}
	got := readMirror(t, base)
	if got["requests"] != int64(4) {
		t.Errorf("requests = %v (%T); want int64 4 (a signed level)", got["requests"], got["requests"])
	}
	if got["latency_ms"] != 10.0 {
		t.Errorf("latency_ms = %v; want 10.0", got["latency_ms"])
	}
	// One value in the window: statistics entries exist but hold NaN, as does the broken gauge.
	for _, k := range []string{"latency_ms/p99", "latency_ms/count", "broken"} {
		if v, ok := got[k].(float64); !ok || !math.IsNaN(v) {
			t.Errorf("%s = %v; want NaN", k, got[k])
		}
	}
	if len(got) != 12 {
		t.Errorf("%d entries %v; want 12 (requests, latency_ms + 9 statistics, broken)", len(got), got)
	}

	// Values change in place.
	tm.Observe(30 * time.Millisecond)
	c.Inc()
	if err := mir.Update(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = readMirror(t, base)
	if got["requests"] != int64(5) || got["latency_ms/p50"] != 20.0 || got["latency_ms/count"] != 2.0 {
		t.Errorf("after update: %v", got)
	}

	// The set of metrics changes: new layout.
	g := NewGauge("temperature")
	g.Set(21.5)
	if err := reg.Add(g); err != nil {
		t.Fatal(err)
	}
	if err := reg.Remove(failing); err != nil {
		t.Fatal(err)
	}
	if err := mir.Update(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = readMirror(t, base)
	if _, ok := got["broken"]; ok || got["temperature"] != 21.5 || got["requests"] != int64(5) {
		t.Errorf("after relayout: %v", got)
	}

	if err := mir.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{base + ".meta", base + ".values"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after Close: %v; want removed", p, err)
		}
	}
	if err := mir.Update(context.Background()); !errors.Is(err, errMirrorClosed) {
		t.Errorf("Update after Close = %v; want closed error", err)
	}
	if err := mir.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestMirrorRun(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	reg := NewRegistry()
	c := NewCounter("n")
	if err := reg.Add(c); err != nil {
		t.Fatal(err)
	}
	mir := NewMirror(reg, shm.Options{Path: base})
	if err := mir.Run(context.Background(), 0); err == nil {
		t.Error("Run with zero interval succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mir.Run(ctx, 5*time.Millisecond) }()
	c.Add(7)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(base + ".meta"); err == nil {
			if readMirror(t, base)["n"] == int64(7) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("mirror never published n=7")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base + ".meta"); !os.IsNotExist(err) {
		t.Errorf("files left after Run returned: %v", err)
	}
}

func TestMirrorNameClash(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	reg := NewRegistry()
	for _, m := range []Metric{NewGauge("x", WithWindow(time.Hour, 0)), NewGauge("x/count")} {
		if err := reg.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	mir := NewMirror(reg, shm.Options{Path: base})
	defer mir.Close()
	if err := mir.Update(context.Background()); err != nil {
		t.Errorf("Update with a metric named like a statistic: %v", err)
	}
}
