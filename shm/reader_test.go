package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writePair writes base.values then base.meta as the clients do: temporary file and rename,
// values first.
func writePair(t *testing.T, base, meta string, values []byte) {
	t.Helper()
	for _, f := range []struct {
		path string
		data []byte
	}{{base + ".values", values}, {base + ".meta", []byte(meta)}} {
		if err := os.WriteFile(f.path+".tmp", f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.path+".tmp", f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// readerAfterRead returns a Reader of base that has read it once, closed when the test ends.
func readerAfterRead(t *testing.T, base string) *Reader {
	t.Helper()
	r := NewReader(base, ReaderOptions{})
	t.Cleanup(func() { r.Close() })
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	return r
}

func u64(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.NativeEndian.AppendUint64(b, v)
	}
	return b
}

func TestEntryDecoding(t *testing.T) {
	state := func(since uint64, text string, size int) []byte {
		b := make([]byte, size)
		binary.NativeEndian.PutUint64(b, since)
		copy(b[8:], text)
		return b
	}
	tests := []struct {
		name      string
		e         Entry
		values    []byte
		wantBits  uint64
		wantSince int64
		wantText  string
	}{
		{"counter", Entry{Kind: KindCounter, Offset: 8, Size: 8}, u64(1, 0x6261), 0x6261, 0, ""},
		{"counter max", Entry{Kind: KindCounter, Size: 8}, u64(math.MaxUint64), math.MaxUint64, 0, ""},
		{"level negative", Entry{Kind: KindLevel, Size: 8}, u64(uint64(1<<64 - 5)), uint64(1<<64 - 5), 0, ""},
		{"float", Entry{Kind: KindFloat, Size: 8}, u64(math.Float64bits(-2.5)), math.Float64bits(-2.5), 0, ""},
		{"state nul-terminated", Entry{Kind: KindState, Size: 16}, state(42, "abc\x00garbage", 16), 42, 42, "abc"},
		{"state filling the rest", Entry{Kind: KindState, Size: 16}, state(42, "12345678", 16), 42, 42, "12345678"},
		{"state empty text", Entry{Kind: KindState, Size: 16}, state(7, "", 16), 7, 7, ""},
		{"no state, stale text kept, as the original agent", Entry{Kind: KindState, Size: 16}, state(0, "old", 16), 0, 0, "old"},
		{"state at offset", Entry{Kind: KindState, Offset: 8, Size: 24}, append(u64(9), state(5, "héllo", 24)...), 5, 5, "héllo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Bits(tt.values); got != tt.wantBits {
				t.Errorf("Bits = %#x; want %#x", got, tt.wantBits)
			}
			if tt.e.Kind != KindState {
				return
			}
			since, text := tt.e.State(tt.values)
			if since != tt.wantSince || string(text) != tt.wantText {
				t.Errorf("State = %d, %q; want %d, %q", since, text, tt.wantSince, tt.wantText)
			}
		})
	}
	e := Entry{Kind: KindLevel, Size: 8}
	if got := e.Level(u64(uint64(1<<64 - 5))); got != -5 {
		t.Errorf("Level = %d; want -5", got)
	}
	e = Entry{Kind: KindFloat, Size: 8}
	if got := e.Float(u64(math.Float64bits(1.5))); got != 1.5 {
		t.Errorf("Float = %g; want 1.5", got)
	}
}

func TestReaderErrors(t *testing.T) {
	const twoCounters = "counter 8: {\"a\": \"1\"}\ncounter 8: {\"a\": \"2\"}\n"
	tests := []struct {
		class  string
		setup  func(t *testing.T, base string)
		opt    ReaderOptions
		is     error
		substr string
	}{
		{"no files", func(t *testing.T, base string) {}, ReaderOptions{}, fs.ErrNotExist, ".meta"},
		{"no values", func(t *testing.T, base string) {
			os.WriteFile(base+".meta", []byte(twoCounters), 0o644)
		}, ReaderOptions{}, fs.ErrNotExist, ".values"},
		{"truncated values", func(t *testing.T, base string) {
			writePair(t, base, twoCounters, u64(1)[:7])
		}, ReaderOptions{}, ErrShortValues, "values file has 7 bytes, fewer than its meta file describes"},
		{"meta longer than values", func(t *testing.T, base string) {
			writePair(t, base, twoCounters+"pad 8\n", u64(1, 2))
		}, ReaderOptions{}, ErrShortValues, "values file has 16 bytes, fewer than"},
		{"empty values", func(t *testing.T, base string) {
			writePair(t, base, twoCounters, nil)
		}, ReaderOptions{}, ErrShortValues, "has 0 bytes"},
		{"bad meta", func(t *testing.T, base string) {
			writePair(t, base, twoCounters+"counter 8: {\"a\": 3\n", u64(1, 2, 3))
		}, ReaderOptions{}, nil, "app.meta:3: bad JSON"},
		{"meta too large", func(t *testing.T, base string) {
			writePair(t, base, twoCounters, u64(1, 2))
		}, ReaderOptions{MaxMetaSize: 10}, ErrTooLarge, "limit 10"},
		{"layout too large", func(t *testing.T, base string) {
			writePair(t, base, twoCounters, u64(1, 2))
		}, ReaderOptions{MaxValuesSize: 8}, ErrTooLarge, "layout larger than the limit of 8 bytes"},
		{"meta is a symlink", func(t *testing.T, base string) {
			writePair(t, base+"x", twoCounters, u64(1, 2))
			os.Symlink(base+"x.meta", base+".meta")
			os.Symlink(base+"x.values", base+".values")
		}, ReaderOptions{}, syscall.ELOOP, "refusing to follow a symlink"},
		{"values is a directory", func(t *testing.T, base string) {
			os.WriteFile(base+".meta", []byte(twoCounters), 0o644)
			os.Mkdir(base+".values", 0o755)
		}, ReaderOptions{}, nil, "not a regular file"},
		{"meta is a fifo", func(t *testing.T, base string) {
			if err := syscall.Mkfifo(base+".meta", 0o644); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, ReaderOptions{}, nil, "not a regular file"},
		{"open refused by the agent", func(t *testing.T, base string) {
			writePair(t, base, twoCounters, u64(1, 2))
		}, ReaderOptions{Open: func(p string) (*os.File, error) {
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
		}}, fs.ErrPermission, "open meta"},
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "app")
			tt.setup(t, base)
			r := NewReader(base, tt.opt)
			defer r.Close()
			for i := range 2 { // the second read hits the cached error paths
				snap, err := r.Read()
				if err == nil {
					t.Fatalf("Read %d = %+v; want error", i, snap)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("Read %d error %q is not %v", i, err, tt.is)
				}
				if !strings.Contains(err.Error(), tt.substr) {
					t.Errorf("Read %d error %q; want it to contain %q", i, err, tt.substr)
				}
			}
		})
	}
}

// countingOpen counts the files opened through it.
type countingOpen struct {
	n     map[string]int
	after func(path string) // called after each successful open
}

func (c *countingOpen) open(path string) (*os.File, error) {
	f, err := OpenFile(path)
	if err == nil {
		c.n[filepath.Ext(path)]++
		if c.after != nil {
			c.after(path)
		}
	}
	return f, err
}

func TestReaderSteadyState(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"a\": \"1\"}\nlevel 8 signed: {\"a\": \"2\"}\n", u64(5, 6))
	co := &countingOpen{n: map[string]int{}}
	r := NewReader(base, ReaderOptions{Open: co.open})
	defer r.Close()
	first, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !first.Changed {
		t.Error("first Read: Changed = false")
	}
	// Values change in place (as an application's mapping does): seen without re-parsing.
	f, err := os.OpenFile(base+".values", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(u64(7), 0)
	f.Close()
	for i := range 3 {
		snap, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if snap.Changed || snap.Layout != first.Layout {
			t.Errorf("Read %d: Changed=%v, same layout=%v; want false, true", i, snap.Changed, snap.Layout == first.Layout)
		}
		if got := snap.Layout.Entries[0].Counter(snap.Values); got != 7 {
			t.Errorf("Read %d: counter = %d; want 7", i, got)
		}
	}
	if co.n[".meta"] != 1 || co.n[".values"] != 1 {
		t.Errorf("opened %v; want each file once", co.n)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.Read(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("steady-state Read allocates %v times; want 0", allocs)
	}
}

func TestReaderMetaRewrittenInPlace(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"a\": \"1\"}\n", u64(5, 6))
	r := readerAfterRead(t, base)
	// Forbidden by the protocol, but a changed size or mtime must still be noticed.
	if err := os.WriteFile(base+".meta", []byte("counter 8: {\"a\": \"1\"}\ncounter 8: {\"a\": \"2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Changed || len(snap.Layout.Entries) != 2 {
		t.Errorf("Changed=%v entries=%d; want true, 2", snap.Changed, len(snap.Layout.Entries))
	}
}

func TestReaderRestartedWriter(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"gen\": \"1\"}\n", u64(1))
	r := readerAfterRead(t, base)
	// The writer restarts and is between its two renames: new .values, old .meta.
	if err := os.WriteFile(base+".values.tmp", u64(0, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(base+".values.tmp", base+".values"); err != nil {
		t.Fatal(err)
	}
	// Between the renames the Reader still reads the old .values through the descriptor it
	// paired with the old .meta: old values with the old layout, never the new values with it.
	if snap, err := r.Read(); err != nil || snap.Changed || snap.Layout.Entries[0].Labels["gen"] != "1" || snap.Layout.Entries[0].Counter(snap.Values) != 1 {
		t.Fatalf("Read between renames = %+v, %v; want the old generation's layout and value", snap, err)
	}
	// Now the new .meta lands.
	if err := os.WriteFile(base+".meta.tmp", []byte("pad 8\ncounter 8: {\"gen\": \"2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(base+".meta.tmp", base+".meta"); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	e := snap.Layout.Entries[0]
	if !snap.Changed || e.Labels["gen"] != "2" || e.Counter(snap.Values) != 2 {
		t.Errorf("after restart: Changed=%v labels=%v value=%d; want true, gen 2, 2", snap.Changed, e.Labels, e.Counter(snap.Values))
	}
}

// TestReaderMetaReplacedMidRead replaces both files while the Reader has just opened .values:
// the read must start over and return the new generation, never old values with a new layout
// or new values with the old one.
func TestReaderMetaReplacedMidRead(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"gen\": \"1\"}\n", u64(1))
	replaced := false
	co := &countingOpen{n: map[string]int{}}
	co.after = func(path string) {
		if strings.HasSuffix(path, ".values") && !replaced {
			replaced = true
			writePair(t, base, "pad 8\ncounter 8: {\"gen\": \"2\"}\n", u64(0, 2))
		}
	}
	r := NewReader(base, ReaderOptions{Open: co.open})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !replaced {
		t.Fatal("files were not replaced during the read")
	}
	e := snap.Layout.Entries[0]
	if e.Labels["gen"] != "2" || e.Counter(snap.Values) != 2 {
		t.Errorf("got labels %v value %d; want gen 2 with value 2", e.Labels, e.Counter(snap.Values))
	}
	if co.n[".meta"] != 2 || co.n[".values"] != 2 {
		t.Errorf("opened %v; want each file twice", co.n)
	}
}

// TestReaderFilesKeepChanging replaces the files at every open: Read gives up with
// ErrNotReady after a bounded number of attempts.
func TestReaderFilesKeepChanging(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"gen\": \"1\"}\n", u64(1))
	co := &countingOpen{n: map[string]int{}}
	gen := 1
	co.after = func(path string) {
		if strings.HasSuffix(path, ".values") {
			gen++
			writePair(t, base, "counter 8: {\"gen\": \""+string(rune('0'+gen))+"\"}\n", u64(uint64(gen)))
		}
	}
	r := NewReader(base, ReaderOptions{Open: co.open})
	defer r.Close()
	if snap, err := r.Read(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Read = %+v, %v; want ErrNotReady", snap, err)
	}
	if co.n[".values"] > maxAttempts {
		t.Errorf("opened .values %d times; want at most %d", co.n[".values"], maxAttempts)
	}
}

// TestReaderYoungValuesUnderOldMeta pairs for the first time while a writer that does not
// remove its old .meta is between its renames.
func TestReaderYoungValuesUnderOldMeta(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(base+".meta", []byte("counter 8: {\"gen\": \"1\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mb, ok := birthNs(base + ".meta")
	if !ok {
		t.Skip("file system reports no birth time")
	}
	for {
		os.Remove(base + ".values")
		if err := os.WriteFile(base+".values", u64(0, 2), 0o644); err != nil {
			t.Fatal(err)
		}
		if vb, _ := birthNs(base + ".values"); vb > mb {
			break
		}
		time.Sleep(5 * time.Millisecond) // birth times are coarse
	}
	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	if snap, err := r.Read(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Read = %+v, %v; want ErrNotReady", snap, err)
	}
}

func TestReaderCloseAndReuse(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"a\": \"1\"}\n", u64(3))
	r := NewReader(base, ReaderOptions{})
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Read()
	if err != nil || !snap.Changed || snap.Layout.Entries[0].Counter(snap.Values) != 3 {
		t.Errorf("Read after Close = %+v, %v", snap, err)
	}
	r.Close()
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReaderBadBase(t *testing.T) {
	for _, base := range []string{"", "a\x00b"} {
		r := NewReader(base, ReaderOptions{})
		if _, err := r.Read(); err == nil {
			t.Errorf("Read of base %q succeeded", base)
		}
	}
}

// TestReaderValuesTruncatedUnderMapping: an application cutting its mapped .values file short
// gets an ErrShortValues error (the SIGBUS of reading the mapping is recovered), and its values
// are read again once the file is long enough.
func TestReaderValuesTruncatedUnderMapping(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	// Two pages of values, so that cutting the file to one page leaves part of the mapping with
	// no file behind it at all.
	var meta strings.Builder
	for i := range 1024 {
		fmt.Fprintf(&meta, "counter 8: {\"i\": \"%d\"}\n", i)
	}
	vals := make([]byte, 8192)
	binary.NativeEndian.PutUint64(vals[8184:], 77)
	writePair(t, base, meta.String(), vals)
	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.mapped) == 0 {
		t.Fatal("values not mapped")
	}
	if got := snap.Layout.Entries[1023].Counter(snap.Values); got != 77 {
		t.Fatalf("last counter = %d; want 77", got)
	}
	for _, size := range []int64{4096, 0} {
		if err := os.Truncate(base+".values", size); err != nil {
			t.Fatal(err)
		}
		for _, read := range []func() (Snapshot, error){r.Read, r.ReadUnchanged} {
			if _, err := read(); !errors.Is(err, ErrShortValues) {
				t.Errorf("after truncating to %d: Read = %v; want ErrShortValues", size, err)
			}
		}
	}
	// The application grows it back (same file): read, and mapped, again.
	f, err := os.OpenFile(base+".values", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint64(vals[8184:], 78)
	f.WriteAt(vals, 0)
	f.Close()
	snap, err = r.ReadUnchanged()
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Layout.Entries[1023].Counter(snap.Values); got != 78 || len(r.mapped) == 0 {
		t.Errorf("after growing back: last counter = %d, mapped %d bytes; want 78, mapped", got, len(r.mapped))
	}
}

// TestReaderReadUnchanged: ReadUnchanged does not notice a replaced .meta (it reads the values
// of the file paired with the parsed one), Read does; neither allocates in the steady state.
func TestReaderReadUnchanged(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"gen\": \"1\"}\n", u64(1))
	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	first, err := r.ReadUnchanged()
	if err != nil || !first.Changed {
		t.Fatalf("first ReadUnchanged = %+v, %v; want a changed layout", first, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.ReadUnchanged() }); allocs != 0 {
		t.Errorf("steady-state ReadUnchanged allocates %v times; want 0", allocs)
	}
	writePair(t, base, "counter 8: {\"gen\": \"2\"}\n", u64(2))
	snap, err := r.ReadUnchanged()
	if err != nil || snap.Changed || snap.Layout.Entries[0].Counter(snap.Values) != 1 {
		t.Errorf("ReadUnchanged after the files were replaced = %+v, %v; want the old pair's values", snap, err)
	}
	snap, err = r.Read()
	if err != nil || !snap.Changed || snap.Layout.Entries[0].Counter(snap.Values) != 2 {
		t.Errorf("Read after the files were replaced = %+v, %v; want the new pair", snap, err)
	}
}

// TestReaderFilesRemoved: once a Read found the files gone, no read returns the values of the
// removed (still open and mapped) .values file until the files are back.
func TestReaderFilesRemoved(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writePair(t, base, "counter 8: {\"gen\": \"1\"}\n", u64(1))
	r := readerAfterRead(t, base)
	os.Remove(base + ".values")
	os.Remove(base + ".meta")
	if _, err := r.Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of removed files = %v; want ErrNotExist", err)
	}
	for i := range 3 {
		if snap, err := r.ReadUnchanged(); err == nil {
			t.Fatalf("ReadUnchanged %d after the files were found removed = %+v; want an error", i, snap)
		}
	}
	writePair(t, base, "counter 8: {\"gen\": \"2\"}\n", u64(2))
	snap, err := r.ReadUnchanged()
	if err != nil || snap.Layout.Entries[0].Counter(snap.Values) != 2 {
		t.Errorf("ReadUnchanged once the files are back = %+v, %v; want the new pair", snap, err)
	}
}
