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

	"github.com/cantal-go/cantal/internal/confined"
	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/shm"
)

type table []procscan.Process

func (t table) AppendTable(dst []procscan.Process) []procscan.Process { return append(dst, t...) }

func TestCollect(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := shm.NewCollection(shm.Options{Path: base})
	hits := shm.Must(c.Counter(map[string]string{"metric": "hits", "pid": "spoofed"}))
	// An application cannot mark its series as pushed (finding 2's other side: a push with the
	// same pid and process labels could otherwise land on it).
	temp := shm.Must(c.Float(map[string]string{"metric": "temp", "source": "push"}))
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
		if _, ok := ref.Labels[series.SourceLabel]; ok {
			t.Errorf("%v: an application's series carries the pushed series' source label", ref.Labels)
		}
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

// startNobody starts a process of uid 65534 for the test's duration and returns its pid.
func startNobody(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// mkdirOwned makes a directory with the given owner and mode.
func mkdirOwned(t *testing.T, path string, uid int, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, uid, uid)
	os.Chmod(path, mode)
	return path
}

// writePairOwned writes base's .values and then .meta (as clients do: a .values younger than its
// .meta is taken for the next one's), owned by uid.
func writePairOwned(t *testing.T, base, meta string, uid int) {
	t.Helper()
	for _, f := range [][2]string{{base + ".values", "\x01\x00\x00\x00\x00\x00\x00\x00"}, {base + ".meta", meta}} {
		if err := os.WriteFile(f[0], []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(f[0], uid, uid)
	}
}

// TestUnreachableCantalPathSameRefusal: a process of uid 65534 pointing CANTAL_PATH into a
// directory it cannot search gets the same refusal whether the files exist there or not (and
// whether a subdirectory on the way exists or not), so /api/v1/status cannot be used to probe
// root-only directories; where it can look, the answers stay precise.
//
// Security finding 13.
func TestUnreachableCantalPathSameRefusal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("must run as root, like the agent")
	}
	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755)
	os.Chmod(top, 0o755)
	private := mkdirOwned(t, filepath.Join(top, "private"), 0, 0o700)
	writePairOwned(t, filepath.Join(private, "exists"), "counter 8: {\"metric\": \"secret\"}\n", 65534)
	mkdirOwned(t, filepath.Join(private, "sub"), 65534, 0o755)
	writePairOwned(t, filepath.Join(private, "sub", "app"), "counter 8: {\"metric\": \"secret\"}\n", 65534)
	open := mkdirOwned(t, filepath.Join(top, "open"), 0, 0o755)
	writePairOwned(t, filepath.Join(open, "roots"), "counter 8: {\"metric\": \"secret\"}\n", 0)

	pid := startNobody(t)
	paths := []string{
		filepath.Join(private, "exists"), filepath.Join(private, "missing"),
		filepath.Join(private, "sub", "app"), filepath.Join(private, "nosub", "app"),
		filepath.Join(open, "missing"), filepath.Join(open, "roots"),
	}
	var procs table
	for _, p := range paths {
		procs = append(procs, procscan.Process{PID: pid, UID: 65534, Name: "sleep", CantalPath: p})
	}
	coll := New(procs, Options{})
	defer coll.Close()
	for scan := range 2 {
		rec := series.NewRecorder()
		if err := coll.Collect(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Refs()) != 0 {
			t.Errorf("scan %d: series %v", scan, rec.Refs())
		}
		reason := func(path string) string {
			ps := rec.Problems[path+" (pid "+strconv.Itoa(pid)+")"]
			if len(ps) != 1 {
				return fmt.Sprintf("%d problems %q", len(ps), ps)
			}
			// The refusal names the directory the process named; what follows is the reason.
			_, r, _ := strings.Cut(ps[0], ": refused: ")
			return r
		}
		for _, p := range paths[:4] {
			if got := reason(p); got != confined.ReasonUnreachable {
				t.Errorf("scan %d: %s: reason %q; want %q", scan, p, got, confined.ReasonUnreachable)
			}
		}
		// In a directory it can search, nobody could see for itself what is there.
		if ps := rec.Problems[paths[4]+" (pid "+strconv.Itoa(pid)+")"]; len(ps) != 0 {
			t.Errorf("scan %d: missing files where nobody can look: problems %q; want none", scan, ps)
		}
		if got := reason(paths[5]); !strings.Contains(got, "owned by uid 0") {
			t.Errorf("scan %d: root's files where nobody can look: %q; want owned by uid 0", scan, got)
		}
		if len(rec.Problems) != 5 {
			t.Errorf("scan %d: problems %v; want 5", scan, rec.Problems)
		}
		if strings.Contains(fmt.Sprint(rec.Problems), "secret") {
			t.Errorf("scan %d: problems quote a file: %v", scan, rec.Problems)
		}
	}
}

// TestSwappedDirectoryNotFollowedAsRoot: once the files' directory is open, the process's owner
// replacing it, or a directory above it, with a symlink into a root-only directory does not make
// the agent look there as root: the reader keeps to the directory it resolved as the owner (or
// resolves the path again as the owner when inotify says the directory moved), and what it
// reports is the same whether the root-only directory holds such files or not.
//
// Security finding 13.
func TestSwappedDirectoryNotFollowedAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("must run as root, like the agent")
	}
	for _, swap := range []string{"run", "home"} { // the files' directory, or its parent
		t.Run(swap, func(t *testing.T) {
			var reports [2]string
			for i, plant := range []bool{true, false} {
				top := t.TempDir()
				os.Chmod(filepath.Dir(top), 0o755)
				os.Chmod(top, 0o755)
				private := mkdirOwned(t, filepath.Join(top, "private"), 0, 0o700)
				mkdirOwned(t, filepath.Join(private, "run"), 65534, 0o755)
				if plant {
					writePairOwned(t, filepath.Join(private, "run", "app"), "counter 8: {\"metric\": \"root\"}\n", 65534)
				}
				home := mkdirOwned(t, filepath.Join(top, "home"), 65534, 0o755)
				run := mkdirOwned(t, filepath.Join(home, "run"), 65534, 0o755)
				base := filepath.Join(run, "app")
				writePairOwned(t, base, "counter 8: {\"metric\": \"mine\"}\n", 65534)
				pid := startNobody(t)
				coll := New(table{{PID: pid, UID: 65534, Name: "sleep", CantalPath: base}}, Options{})
				defer coll.Close()
				rec := series.NewRecorder()
				coll.Collect(context.Background(), rec)
				if len(rec.Refs()) != 1 || len(rec.Problems) != 0 {
					t.Fatalf("before the swap: series %v, problems %v", rec.Refs(), rec.Problems)
				}
				// The owner moves a directory away and puts a symlink to root's in its place.
				moved := filepath.Join(top, swap)
				if swap == "run" {
					moved = run
				}
				if err := os.Rename(moved, moved+".old"); err != nil {
					t.Fatal(err)
				}
				if swap == "home" {
					mkdirOwned(t, home, 65534, 0o755)
				}
				if err := os.Symlink(filepath.Join(private, "run"), run); err != nil {
					t.Fatal(err)
				}
				os.Lchown(run, 65534, 65534)
				var report strings.Builder
				for range 2 * fullCheckEvery {
					clear(rec.Values)
					clear(rec.Problems)
					coll.Collect(context.Background(), rec)
					for key := range rec.Values {
						fmt.Fprintf(&report, "%s ", rec.Refs()[key].Labels["metric"])
					}
					for src, ps := range rec.Problems {
						fmt.Fprintf(&report, "%s: %q\n", src, ps)
					}
				}
				if strings.Contains(report.String(), "root") {
					t.Errorf("plant=%v: read root's directory: %s", plant, report.String())
				}
				reports[i] = strings.NewReplacer(top, "TOP", strconv.Itoa(pid), "PID").Replace(report.String())
				t.Logf("plant=%v: %s", plant, reports[i])
			}
			if reports[0] != reports[1] {
				t.Errorf("reports differ with and without files in the root-only directory:\n%s\n---\n%s", reports[0], reports[1])
			}
		})
	}
}

// A .meta entry the original Cantal agent drops (Python's Counter(metric="x", shard=1): a label
// value that is not a string) is reported among the scan's problems, by line and reason, and
// the application's other metrics are read (issue 35 item 3; before, the whole file was
// refused and the application lost them all).
func TestDroppedMetaEntryIsAProblemAndTheRestIsRead(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	meta := "counter 8: {\"metric\": \"x\", \"shard\": 1}\ncounter 8: {}\ncounter 8: {\"metric\": \"y\"}\n"
	values := binary.NativeEndian.AppendUint64(nil, 1)
	values = binary.NativeEndian.AppendUint64(values, 2)
	values = binary.NativeEndian.AppendUint64(values, 3)
	if err := os.WriteFile(base+".values", values, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".meta", []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	coll := New(table{{PID: os.Getpid(), UID: os.Getuid(), Name: "py", CantalPath: base}}, Options{})
	defer coll.Close()
	rec := series.NewRecorder()
	if err := coll.Collect(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for key, ref := range rec.Refs() {
		got[ref.Labels["metric"]] = rec.Values[key]
	}
	if len(got) != 2 || got["y"] != 3 || got[""] != 2 {
		t.Errorf("series %v; want y=3 and the {} entry (agent's labels only) = 2", got)
	}
	if !strings.Contains(fmt.Sprint(rec.Problems), "app.meta:1: a label value is not a string") || len(rec.Problems) != 1 {
		t.Errorf("problems %v; want line 1's label value reported", rec.Problems)
	}
}
