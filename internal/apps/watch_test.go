package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
)

// replaceFiles writes base's pair as the clients do: .values then .meta, each through a
// temporary file and a rename.
func replaceFiles(t *testing.T, base string, gen int) {
	t.Helper()
	vals := binary.NativeEndian.AppendUint64(nil, uint64(gen))
	meta := fmt.Sprintf("counter 8: {\"metric\": \"hits\", \"gen\": \"%d\"}\n", gen)
	for _, f := range []struct{ path, data string }{{base + ".values", string(vals)}, {base + ".meta", meta}} {
		if err := os.WriteFile(f.path+".tmp", []byte(f.data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.path+".tmp", f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// collectGens scans into rec and returns the gen label and value of each series written.
func collectGens(t *testing.T, coll *Collector, rec *series.Recorder) map[string]uint64 {
	t.Helper()
	clear(rec.Values)
	clear(rec.Problems)
	if err := coll.Collect(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Problems) != 0 {
		t.Errorf("problems: %v", rec.Problems)
	}
	got := map[string]uint64{}
	for key, v := range rec.Values {
		got[rec.Refs()[key].Labels["gen"]] = v
	}
	return got
}

// watchedApp returns a collector of one application at base (gen 1 written there), closed when
// the test ends, and the recorder its first scan, checked, went to.
func watchedApp(t *testing.T, base string) (*Collector, *series.Recorder) {
	t.Helper()
	coll := New(table{sysscanProcess(os.Getpid(), base)}, Options{})
	t.Cleanup(func() { coll.Close() })
	rec := series.NewRecorder()
	if got := collectGens(t, coll, rec); got["1"] != 1 {
		t.Fatalf("first scan read %v; want gen 1 = 1", got)
	}
	return coll, rec
}

// TestWatchedFilesReplaced: an application replacing its files is read anew at the very next
// scan (the inotify event, not the periodic check, must be what notices it: the test replaces
// them at more scans in a row than the period), and an unchanged one keeps being read.
func TestWatchedFilesReplaced(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	replaceFiles(t, base, 1)
	coll, rec := watchedApp(t, base)
	for _, g := range coll.groups {
		if g.watch == nil {
			t.Fatal("the files' directory is not watched")
		}
	}
	for gen := 2; gen < 2+2*fullCheckEvery; gen++ {
		replaceFiles(t, base, gen)
		if got := collectGens(t, coll, rec); len(got) != 1 || got[fmt.Sprint(gen)] != uint64(gen) {
			t.Fatalf("scan after writing gen %d read %v", gen, got)
		}
		if got := collectGens(t, coll, rec); len(got) != 1 || got[fmt.Sprint(gen)] != uint64(gen) {
			t.Fatalf("second scan after writing gen %d read %v", gen, got)
		}
	}
}

// TestWatchedDirectoryReplaced: the directory holding the files is removed and made again
// (its watch goes away with it); the files in the new directory are read within the period.
func TestWatchedDirectoryReplaced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	os.Mkdir(dir, 0o755)
	base := filepath.Join(dir, "app")
	replaceFiles(t, base, 1)
	coll, rec := watchedApp(t, base)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(dir, 0o755)
	replaceFiles(t, base, 2)
	for i := range fullCheckEvery + 1 {
		got := collectGens(t, coll, rec)
		if got["2"] == 2 {
			return
		}
		t.Logf("scan %d after the directory was replaced: %v", i, got)
	}
	t.Errorf("the files of the new directory were not read within %d scans", fullCheckEvery+1)
}

// TestWatcherEventsMarkOnlyTheirGroup: an event on one application's files marks that group
// only; the others are read without a check.
func TestWatcherEventsMarkOnlyTheirGroup(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	replaceFiles(t, a, 1)
	replaceFiles(t, b, 1)
	w := newWatcher()
	defer w.close()
	ga, gb := &group{}, &group{}
	if !w.add(ga, a) || !w.add(gb, b) {
		t.Fatal("cannot watch")
	}
	if ga.watch != gb.watch {
		t.Error("two groups in one directory have two watches")
	}
	ga.dirty, gb.dirty = false, false
	replaceFiles(t, a, 2)
	os.WriteFile(filepath.Join(dir, "unrelated"), nil, 0o644)
	if all := w.poll(); all || !ga.dirty || gb.dirty {
		t.Errorf("after replacing a's files: all=%v a dirty=%v b dirty=%v; want false true false", all, ga.dirty, gb.dirty)
	}
	w.remove(ga)
	w.remove(gb)
	if len(w.dirs) != 0 {
		t.Errorf("%d watched directories left after removing every group", len(w.dirs))
	}
}

// TestCollectSteadyStateAllocs: a scan of unchanged applications allocates nothing (the
// collector reuses its table, its per-group tallies and the published pid list).
func TestCollectSteadyStateAllocs(t *testing.T) {
	dir := t.TempDir()
	var procs table
	for i := range 20 {
		base := filepath.Join(dir, fmt.Sprint("app", i))
		replaceFiles(t, base, 1)
		procs = append(procs, sysscanProcess(os.Getpid(), base))
	}
	coll := New(procs, Options{})
	defer coll.Close()
	sink := &series.Discard{}
	for range fullCheckEvery { // the first scans open and watch everything
		if err := coll.Collect(context.Background(), sink); err != nil {
			t.Fatal(err)
		}
	}
	if coll.Count() != 20 {
		t.Fatalf("Count = %d; want 20", coll.Count())
	}
	allocs := testing.AllocsPerRun(fullCheckEvery, func() {
		coll.Collect(context.Background(), sink)
	})
	if allocs != 0 {
		t.Errorf("a steady-state scan of 20 applications allocates %v times; want 0", allocs)
	}
}

func sysscanProcess(pid int, base string) procscan.Process {
	return procscan.Process{PID: pid, UID: os.Getuid(), Name: "app", CantalPath: base}
}

// batchRecorder is a series.BatchSink over a Recorder that counts its PutBatch calls.
type batchRecorder struct {
	*series.Recorder
	batches int
}

func (b *batchRecorder) PutBatch(batch *series.Batch, bits []uint64) {
	b.batches++
	for i, r := range batch.Refs {
		if r.Kind != series.State {
			b.Put(r, bits[i])
		}
	}
}

// TestCollectBatchSink: with a series.BatchSink each application's numbers go in one PutBatch,
// with the same values as through Put; states still go through PutState.
func TestCollectBatchSink(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	vals := binary.NativeEndian.AppendUint64(nil, 7)
	vals = binary.NativeEndian.AppendUint64(vals, uint64(1700000000000))
	vals = append(vals, "busy\x00\x00\x00\x00"...)
	vals = binary.NativeEndian.AppendUint64(vals, 9)
	meta := "counter 8: {\"metric\": \"a\"}\nstate 16: {\"metric\": \"s\"}\nlevel 8 signed: {\"metric\": \"b\"}\n"
	os.WriteFile(base+".values", vals, 0o644)
	os.WriteFile(base+".meta", []byte(meta), 0o644)
	var got [2]map[string]uint64
	for i, batch := range []bool{false, true} {
		coll := New(table{sysscanProcess(os.Getpid(), base)}, Options{})
		rec := &batchRecorder{Recorder: series.NewRecorder()}
		var sink series.Sink = rec.Recorder
		if batch {
			sink = rec
		}
		for range 2 {
			if err := coll.Collect(context.Background(), sink); err != nil {
				t.Fatal(err)
			}
		}
		coll.Close()
		if batch && rec.batches != 2 {
			t.Errorf("PutBatch called %d times in 2 scans of one application; want 2", rec.batches)
		}
		got[i] = map[string]uint64{}
		for key, v := range rec.Values {
			got[i][rec.Refs()[key].Labels["metric"]] = v
		}
		for key, st := range rec.States {
			if rec.Refs()[key].Labels["metric"] != "s" || st.Text != "busy" {
				t.Errorf("state %s = %+v", key, st)
			}
		}
		if len(rec.States) != 1 {
			t.Errorf("batch=%v: %d states; want 1", batch, len(rec.States))
		}
	}
	if len(got[0]) != 2 || got[0]["a"] != 7 || got[0]["b"] != 9 || !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("values through Put %v, through PutBatch %v; want a=7 b=9 both", got[0], got[1])
	}
}
