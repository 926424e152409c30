package procscan

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseStatState(t *testing.T) {
	for _, c := range []struct {
		in   string
		want byte
		ok   bool
	}{
		{"43 (worker) D 1 42 42 0 -1 4194560\n", 'D', true},
		{"44 (my (weird) app) S 1", 'S', true},
		{"45 (a) b) I 0", 'I', true},
		{"46 (x) R", 'R', true},
		{"47 (x)", 0, false},
		{"47 (x) ", 0, false},
		{"48 x) S 1", 0, false},
		{"49 (x) SS 1", 0, false},
		{"50 (x) 1 2", 0, false},
		{"", 0, false},
	} {
		got, err := parseStatState([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseStatState(%q) = %q, %v; want %q, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseStatState(f *testing.F) {
	addFixtures(f, "proc/42/stat", "proc/2/stat", "real/pid_stat")
	f.Add([]byte("43 (a) b) D 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseStatState(b)
		if err == nil && !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			t.Errorf("state %q accepted", c)
		}
	})
}

// statesTree is the fixture /proc with pid 42's three threads under 42/task (the main one
// R as its stat line, 43 sleeping, 44 in D) and the kernel's limits.
func statesTree(t *testing.T) string {
	t.Helper()
	proc := copyTree(t, "testdata/proc")
	for tid, st := range map[int]string{43: "S", 44: "D"} {
		d := filepath.Join(proc, "42/task", strconv.Itoa(tid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		line := strconv.Itoa(tid) + " (worker) " + st + " 1 42 42 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 3 0 5001 1 1 18446744073709551615\n"
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(proc, "42/task/42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"pid_max": "4194304\n", "threads-max": "127393\n"} {
		if err := os.WriteFile(filepath.Join(proc, "sys/kernel", f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc
}

// statesOf returns the processes.* series r holds with a value, keyed by metric and label.
func statesOf(r *series.Recorder) map[string]uint64 {
	got := map[string]uint64{}
	for key, ref := range r.Refs() {
		v, ok := r.Values[key]
		m := ref.Labels["metric"]
		if !ok || len(m) < 10 || m[:10] != "processes." {
			continue
		}
		got[m+"{"+ref.Labels["state"]+ref.Labels["thread_state"]+"}"] = v
	}
	return got
}

// TestProcessStatesFixture: with Options.States the scan counts processes and threads per
// state from the fixture, as node_exporter's processes collector does (the main thread of a
// multi-threaded process by the process's line, the others from task/TID/stat, walked every
// threadsEvery scans), with the limits; a state that empties loses its series; without the
// option there are none.
func TestProcessStatesFixture(t *testing.T) {
	proc := statesTree(t)
	opt := fixtureOptions()
	opt.Proc, opt.States = proc, true
	p := NewProcesses(opt)
	defer p.Close()
	r := series.NewRecorder()
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		// pids 1, 2, 4242, 5000 sleep; 42 runs with 3 threads.
		"processes.pids{}": 5, "processes.threads{}": 7,
		"processes.state{S}": 4, "processes.state{R}": 1,
		"processes.threads_state{S}": 5, "processes.threads_state{R}": 1, "processes.threads_state{D}": 1,
		"processes.max_processes{}": 4194304, "processes.max_threads{}": 127393,
	}
	if got := statesOf(r); !maps.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}

	// Thread 44 leaves D for S; pid 42's own line is still R. The scans until the next walk
	// of the task directories (threadsEvery) count it as the last walk found it.
	line := "44 (worker) S 1 42 42 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 3 0 5001 1 1 18446744073709551615\n"
	if err := os.WriteFile(filepath.Join(proc, "42/task/44/stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	for scan := 2; scan <= threadsEvery+1; scan++ {
		clear(r.Values)
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		got := statesOf(r)
		if scan <= threadsEvery {
			if got["processes.threads_state{D}"] != 1 {
				t.Errorf("scan %d, between walks: %v; want D 1 as walked", scan, got)
			}
			continue
		}
		if _, ok := got["processes.threads_state{D}"]; ok || got["processes.threads_state{S}"] != 6 {
			t.Errorf("scan %d, a walk, after thread 44 slept: %v; want no D and 6 S", scan, got)
		}
	}

	off := NewProcesses(fixtureOptions())
	defer off.Close()
	r = series.NewRecorder()
	if err := off.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := statesOf(r); len(got) != 0 {
		t.Errorf("without States: %v", got)
	}
}
