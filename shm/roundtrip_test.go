package shm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriterReaderRoundTrip(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := NewCollection(Options{Path: base})
	req := Must(c.Counter(map[string]string{"metric": "requests.number"}))
	dur := Must(c.Counter(map[string]string{"metric": "requests.duration", "unit": "ms"}))
	q := Must(c.Integer(map[string]string{"metric": "queue"}))
	f := Must(c.Float(map[string]string{"metric": "load"}))
	st := Must(c.State(map[string]string{"state": "sql"}, 0))
	big := Must(c.State(map[string]string{"state": "big"}, 100))

	req.Add(96) // before Start: carried over
	q.Set(-5)
	f.Set(0.5)
	st.EnterAt("before", time.UnixMilli(1000))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	req.Inc()
	dur.Add(0x6267)
	q.Sub(2)
	f.Add(0.25)
	big.EnterAt("SELECT 1", time.UnixMilli(123456))

	meta, err := os.ReadFile(base + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	const wantMeta = "level 8 float: {\"metric\": \"load\"}\n" +
		"level 8 signed: {\"metric\": \"queue\"}\n" +
		"counter 8: {\"metric\": \"requests.duration\", \"unit\": \"ms\"}\n" +
		"counter 8: {\"metric\": \"requests.number\"}\n" +
		"pad 32\n" +
		"state 64: {\"state\": \"sql\"}\n" +
		"state 100: {\"state\": \"big\"}\n"
	if string(meta) != wantMeta {
		t.Errorf("meta file:\n%s\nwant:\n%s", meta, wantMeta)
	}

	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Changed {
		t.Error("first Read: Changed = false")
	}
	got := map[string]any{}
	for i := range snap.Layout.Entries {
		e := &snap.Layout.Entries[i]
		name := e.Labels["metric"] + e.Labels["state"]
		switch e.Kind {
		case KindCounter:
			got[name] = e.Counter(snap.Values)
		case KindLevel:
			got[name] = e.Level(snap.Values)
		case KindFloat:
			got[name] = e.Float(snap.Values)
		case KindState:
			since, text := e.State(snap.Values)
			got[name] = [2]any{since, string(text)}
		}
	}
	want := map[string]any{
		"requests.number":   uint64(97),
		"requests.duration": uint64(0x6267),
		"queue":             int64(-7),
		"load":              0.75,
		"sql":               [2]any{int64(1000), "before"},
		"big":               [2]any{int64(123456), "SELECT 1"},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v; want %v", k, got[k], w)
		}
	}
	snap, err = r.Read()
	if err != nil || snap.Changed {
		t.Errorf("second Read: changed=%v err=%v", snap.Changed, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{base + ".meta", base + ".values"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("after Close, stat %s: %v", p, err)
		}
	}
	req.Inc() // still safe
}
