package apps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/sysscan"
	"github.com/cantal-go/cantal/shm"
)

type table []sysscan.Process

func (t table) AppendTable(dst []sysscan.Process) []sysscan.Process { return append(dst, t...) }

func TestCollect(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := shm.NewCollection(shm.Options{Path: base})
	hits := shm.Must(c.Counter(map[string]string{"metric": "hits", "pid": "spoofed"}))
	temp := shm.Must(c.Float(map[string]string{"metric": "temp"}))
	phase := shm.Must(c.State(map[string]string{"metric": "phase"}, 64))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hits.Add(5)
	temp.Set(1.25)
	phase.Enter("warming")

	self, parent := os.Getpid(), os.Getppid()
	procs := table{
		{PID: self, UID: os.Getuid(), Name: "worker", Cgroup: "system.app", CantalPath: base, CantalAppName: "shop"},
		// A second process naming the same files in the same namespace: read once.
		{PID: parent, UID: os.Getuid(), Name: "parent", CantalPath: base},
		{PID: self + 1_000_000, Name: "gone", CantalPath: base + "x"}, // no such pid
	}
	if parent < self {
		procs[0], procs[1] = procs[1], procs[0]
	}
	coll := New(procs, Options{})
	rec := series.NewRecorder()
	if err := coll.Collect(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	// The test process maps the values file (it is the writer); its parent only shares the
	// environment, like a `go run` wrapper. The series carry the writer's pid and name.
	writer := strconv.Itoa(self)
	if len(rec.Refs()) != 3 {
		t.Fatalf("registered %d series; want 3 (the shared files read once): %v", len(rec.Refs()), rec.Refs())
	}
	for _, ref := range rec.Refs() {
		if ref.Labels["pid"] != writer || ref.Labels["process"] != "worker" {
			t.Errorf("%v: want the writer's pid %s and name (and never the file's own pid label)", ref.Labels, writer)
		}
	}
	for key, ref := range rec.Refs() {
		switch ref.Labels["metric"] {
		case "hits":
			if rec.Values[key] != 5 || ref.Kind != series.Counter {
				t.Errorf("hits = %d (%v); want counter 5", rec.Values[key], ref.Kind)
			}
		case "temp":
			if math.Float64frombits(rec.Values[key]) != 1.25 || ref.Kind != series.Float {
				t.Errorf("temp = %v; want float 1.25", math.Float64frombits(rec.Values[key]))
			}
		case "phase":
			if st := rec.States[key]; st.Text != "warming" || st.Since == 0 {
				t.Errorf("phase = %+v; want warming with a time", st)
			}
		}
	}
	if coll.Count() != 1 || !coll.Exports(self) || !coll.Exports(parent) {
		t.Errorf("Count = %d, Exports(self)=%v, Exports(parent)=%v; want 1 application shared by both", coll.Count(), coll.Exports(self), coll.Exports(parent))
	}
	if len(rec.Problems) != 0 {
		t.Errorf("problems: %v", rec.Problems)
	}

	// The process goes away: its reader is closed and it no longer exports.
	coll.procs = table{}
	if err := coll.Collect(context.Background(), series.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	if coll.Count() != 0 || coll.Exports(self) || len(coll.groups) != 0 {
		t.Errorf("after the processes left: count %d, groups %d", coll.Count(), len(coll.groups))
	}
}

// TestRefusedForOtherUID: files the process's uid does not own are refused with a problem and
// produce no series, even when the process table still shows the process as root (its uid is
// read again from /proc when a file is opened for it).
func TestRefusedForOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("must run as root, like the agent")
	}
	base := filepath.Join(t.TempDir(), "root")
	os.WriteFile(base+".meta", []byte("counter 8: {\"metric\": \"secret\"}\n"), 0o600)
	os.WriteFile(base+".values", make([]byte, 8), 0o600)
	nobody := exec.Command("sleep", "60")
	nobody.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := nobody.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nobody.Process.Kill(); nobody.Wait() })
	// A stale table: uid 0, as if the process had dropped root since the last status read.
	coll := New(table{{PID: nobody.Process.Pid, UID: 0, Name: "sleep", CantalPath: base}}, Options{})
	rec := series.NewRecorder()
	coll.Collect(context.Background(), rec)
	if len(rec.Refs()) != 0 {
		t.Errorf("series from a file uid 65534 cannot read: %v", rec.Refs())
	}
	if len(rec.Problems) != 1 || !strings.Contains(fmt.Sprint(rec.Problems), "refused") {
		t.Errorf("problems = %v; want one refusal", rec.Problems)
	}
}

// TestCollectScattered reads numeric entries that are not one array in the values file (a state
// and padding between them), as written by hand rather than by package shm.
func TestCollectScattered(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	meta := "counter 8: {\"metric\": \"a\"}\n" +
		"state 24: {\"metric\": \"s\"}\n" +
		"pad 8\n" +
		"level 8 signed: {\"metric\": \"b\"}\n" +
		"level 8 float: {\"metric\": \"c\"}\n"
	vals := make([]byte, 8+24+8+8+8)
	binary.NativeEndian.PutUint64(vals[0:], 7)
	binary.NativeEndian.PutUint64(vals[8:], 1700000000000)
	copy(vals[16:], "up")
	binary.NativeEndian.PutUint64(vals[40:], uint64(math.MaxUint64)) // -1
	binary.NativeEndian.PutUint64(vals[48:], math.Float64bits(2.5))
	if err := os.WriteFile(base+".values", vals, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".meta", []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	coll := New(table{{PID: os.Getpid(), UID: os.Getuid(), Name: "w", CantalPath: base}}, Options{})
	rec := series.NewRecorder()
	if err := coll.Collect(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for key, ref := range rec.Refs() {
		if ref.Kind == series.State {
			if st := rec.States[key]; st.Text != "up" || st.Since != 1700000000000 {
				t.Errorf("state %+v, want up since 1700000000000", st)
			}
			continue
		}
		got[ref.Labels["metric"]] = rec.Values[key]
	}
	want := map[string]uint64{"a": 7, "b": math.MaxUint64, "c": math.Float64bits(2.5)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("values %v, want %v", got, want)
	}
}
