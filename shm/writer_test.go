package shm

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDeclareErrors(t *testing.T) {
	c := NewCollection(Options{Path: filepath.Join(t.TempDir(), "app")})
	if _, err := c.Counter(map[string]string{"metric": "x", "k": "v"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		declare func() error
		want    string
	}{
		{"no labels", func() error { _, err := c.Counter(nil); return err }, "at least one label"},
		{"empty labels", func() error { _, err := c.Integer(map[string]string{}); return err }, "at least one label"},
		{"duplicate", func() error { _, err := c.Float(map[string]string{"k": "v", "metric": "x"}); return err }, `duplicate metric {"k": "v", "metric": "x"}`},
		{"duplicate state", func() error { _, err := c.State(map[string]string{"k": "v", "metric": "x"}, 0); return err }, "duplicate metric"},
		{"invalid utf-8", func() error { _, err := c.Counter(map[string]string{"m": "\xff"}); return err }, "not valid UTF-8"},
		{"state too small", func() error { _, err := c.State(map[string]string{"m": "s"}, 8); return err }, "state size 8 out of range 9..65535"},
		{"state too large", func() error { _, err := c.State(map[string]string{"m": "s"}, 65536); return err }, "out of range"},
	}
	for _, tt := range tests {
		err := tt.declare()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v; want it to contain %q", tt.name, err, tt.want)
		}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Counter(map[string]string{"metric": "late"}); !errors.Is(err, ErrStarted) {
		t.Errorf("declare after Start: %v; want ErrStarted", err)
	}
	if err := c.Start(); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v; want ErrStarted", err)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	if err := NewCollection(Options{Path: filepath.Join(dir, "a")}).Start(); err == nil || !strings.Contains(err.Error(), "no metrics") {
		t.Errorf("Start without metrics: %v", err)
	}
	c := NewCollection(Options{Path: filepath.Join(dir, "missing", "app")})
	Must(c.Counter(map[string]string{"m": "1"}))
	if err := c.Start(); err == nil {
		t.Error("Start in a missing directory succeeded")
	}
	c = NewCollection(Options{Path: filepath.Join(dir, "b")})
	Must(c.Counter(map[string]string{"m": "1"}))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v; want ErrClosed", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("CANTAL_PATH", "/run/app/x")
	if p, ok := DefaultPath(); p != "/run/app/x" || !ok {
		t.Errorf("DefaultPath() = %q, %v; want /run/app/x, true", p, ok)
	}
	t.Setenv("CANTAL_PATH", "")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	want := "/run/user/1000/cantal." + strconv.Itoa(os.Getpid())
	if p, ok := DefaultPath(); p != want || ok {
		t.Errorf("DefaultPath() = %q, %v; want %q, false", p, ok, want)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	want = "/tmp/cantal." + strconv.Itoa(os.Getuid()) + "." + strconv.Itoa(os.Getpid())
	if p, ok := DefaultPath(); p != want || ok {
		t.Errorf("DefaultPath() = %q, %v; want %q, false", p, ok, want)
	}
}

func TestStartFallbackPathWarns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CANTAL_PATH", "")
	t.Setenv("XDG_RUNTIME_DIR", dir)
	var logs bytes.Buffer
	c := NewCollection(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	Must(c.Counter(map[string]string{"m": "1"}))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := filepath.Join(dir, "cantal."+strconv.Itoa(os.Getpid()))
	if c.Path() != want {
		t.Errorf("Path() = %q; want %q", c.Path(), want)
	}
	if _, err := os.Stat(want + ".meta"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "CANTAL_PATH is not set") || !strings.Contains(logs.String(), want) {
		t.Errorf("log = %q; want a warning naming %s", logs.String(), want)
	}

	t.Setenv("CANTAL_PATH", filepath.Join(dir, "env"))
	logs.Reset()
	c2 := NewCollection(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	Must(c2.Counter(map[string]string{"m": "1"}))
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.Path() != filepath.Join(dir, "env") || logs.Len() != 0 {
		t.Errorf("with CANTAL_PATH: Path() = %q, log %q", c2.Path(), logs.String())
	}
}

func TestStartReplacesOldFiles(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"old\": \"1\"}\n", u64(1))
	os.WriteFile(base+".values.tmp", []byte("junk"), 0o644) // left by a crash
	c := NewCollection(Options{Path: base})
	Must(c.Counter(map[string]string{"new": "1"})).Add(5)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := fixtureValues(t, base)
	if len(got) != 1 || got[0] != `new="1" counter 5` {
		t.Errorf("values = %q", got)
	}
	if _, err := os.Stat(base + ".values.tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

func TestMetricsOperations(t *testing.T) {
	for _, started := range []bool{false, true} {
		t.Run("started="+strconv.FormatBool(started), func(t *testing.T) {
			c := NewCollection(Options{Path: filepath.Join(t.TempDir(), "app")})
			cnt := Must(c.Counter(map[string]string{"m": "c"}))
			in := Must(c.Integer(map[string]string{"m": "i"}))
			fl := Must(c.Float(map[string]string{"m": "f"}))
			st := Must(c.State(map[string]string{"m": "s"}, 16))
			if started {
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			}
			cnt.Inc()
			cnt.Add(41)
			in.Set(10)
			in.Add(-3)
			in.Sub(20)
			fl.Set(1.5)
			fl.Add(-4)
			if cnt.Get() != 42 || in.Get() != -13 || fl.Get() != -2.5 {
				t.Errorf("counter=%d integer=%d float=%g; want 42, -13, -2.5", cnt.Get(), in.Get(), fl.Get())
			}
			if since, text := st.Get(); since != 0 || text != "" {
				t.Errorf("initial state = %d, %q", since, text)
			}
			st.EnterAt("12345678", time.UnixMilli(99))
			if since, text := st.Get(); since != 99 || text != "12345678" {
				t.Errorf("state = %d, %q; want 99, 12345678", since, text)
			}
			st.EnterAt("abc", time.UnixMilli(100))
			if since, text := st.Get(); since != 100 || text != "abc" {
				t.Errorf("state = %d, %q; want 100, abc", since, text)
			}
			st.Exit()
			if since, _ := st.Get(); since != 0 {
				t.Errorf("state after Exit: since %d", since)
			}
		})
	}
}

func TestStateTruncatesOnRuneBoundary(t *testing.T) {
	c := NewCollection(Options{Path: filepath.Join(t.TempDir(), "app")})
	st := Must(c.State(map[string]string{"m": "s"}, 16)) // 8 bytes of text
	tests := []struct{ in, want string }{
		{"123456789", "12345678"},
		{"1234567é", "1234567"}, // é is 2 bytes: would end at byte 9
		{"123456é", "123456é"},  // exactly 8 bytes
		{"12😀😀", "12😀"},         // 4-byte runes
		{"😀😀😀", "😀😀"},
		{"\xff\xff\xff\xff\xff\xff\xff\xff\xff", "\xff\xff\xff\xff\xff\xff\xff\xff"}, // not UTF-8: bytes
	}
	for _, tt := range tests {
		st.EnterAt(tt.in, time.UnixMilli(1))
		if _, got := st.Get(); got != tt.want {
			t.Errorf("Enter(%q): text %q; want %q", tt.in, got, tt.want)
		}
		if utf8.ValidString(tt.in) {
			if _, got := st.Get(); !utf8.ValidString(got) {
				t.Errorf("Enter(%q): text %q is not valid UTF-8", tt.in, got)
			}
		}
	}
	// Time 0 would mean "no state".
	st.EnterAt("x", time.UnixMilli(0))
	if since, _ := st.Get(); since == 0 {
		t.Error("EnterAt(time 0) reads as no state")
	}
}

func TestZeroValueMetrics(t *testing.T) {
	var c Counter
	var i Integer
	var f Float
	var s State
	c.Inc()
	i.Add(-2)
	f.Add(0.5)
	s.Enter("x")
	if c.Get() != 1 || i.Get() != -2 || f.Get() != 0.5 {
		t.Errorf("zero values: %d %d %g", c.Get(), i.Get(), f.Get())
	}
	if since, text := s.Get(); since == 0 || text != "x" {
		t.Errorf("zero State: %d %q", since, text)
	}
}

// TestConcurrentUpdatesAcrossStart updates metrics from many goroutines while Start switches
// them to the mapping: no update may be lost.
func TestConcurrentUpdatesAcrossStart(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := NewCollection(Options{Path: base})
	cnt := Must(c.Counter(map[string]string{"m": "c"}))
	in := Must(c.Integer(map[string]string{"m": "i"}))
	fl := Must(c.Float(map[string]string{"m": "f"}))
	st := Must(c.State(map[string]string{"m": "s"}, 0))
	const workers, perWorker = 8, 2000
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			for j := range perWorker {
				cnt.Inc()
				in.Add(2)
				in.Sub(1)
				fl.Add(1)
				if j%100 == 0 {
					st.Enter("worker " + strconv.Itoa(w))
				}
			}
		}()
	}
	close(startGate)
	time.Sleep(time.Millisecond)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wg.Wait()
	const n = workers * perWorker
	if cnt.Get() != n || in.Get() != n || fl.Get() != n {
		t.Errorf("counter=%d integer=%d float=%g; want %d each", cnt.Get(), in.Get(), fl.Get(), n)
	}
	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Layout.Entries {
		switch e.Kind {
		case KindCounter, KindLevel:
			if e.Bits(snap.Values) != n {
				t.Errorf("%v read %d; want %d", e.Labels, e.Bits(snap.Values), n)
			}
		case KindFloat:
			if e.Float(snap.Values) != n {
				t.Errorf("%v read %g; want %d", e.Labels, e.Float(snap.Values), n)
			}
		case KindState:
			since, text := e.State(snap.Values)
			if since == 0 || !strings.HasPrefix(string(text), "worker ") {
				t.Errorf("state read %d %q", since, text)
			}
		}
	}
}

func TestCloseRemovesFiles(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := NewCollection(Options{Path: base})
	cnt := Must(c.Counter(map[string]string{"m": "c"}))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(base))
	if len(entries) != 0 {
		t.Errorf("files left after Close: %v", entries)
	}
	cnt.Inc() // the mapping stays valid
	if cnt.Get() != 1 {
		t.Errorf("counter after Close = %d", cnt.Get())
	}
	if _, err := r.Read(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read after Close: %v; want ErrNotExist", err)
	}
}

func TestCloseLeavesAnotherProcessFiles(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := NewCollection(Options{Path: base})
	Must(c.Counter(map[string]string{"m": "c"}))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Another process (a restart sharing CANTAL_PATH) replaces the files.
	writePair(t, base, "counter 8: {\"m\": \"other\"}\n", u64(1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".meta", ".values"} {
		if _, err := os.Stat(base + ext); err != nil {
			t.Errorf("Close removed the other process's %s: %v", ext, err)
		}
	}
}
