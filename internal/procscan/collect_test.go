package procscan

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func fixtureOptions() Options {
	return Options{Proc: "testdata/proc", Sys: "testdata/sys", PageSize: 4096}
}

func TestProcessesFixture(t *testing.T) {
	p := NewProcesses(fixtureOptions())
	r := series.NewRecorder()
	// Two scans: a process's series start at its second scan.
	for range 2 {
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatalf("Collect: %v", err)
		}
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	table := p.Table()
	pids := make([]int, len(table))
	for i, pr := range table {
		pids[i] = pr.PID
	}
	if !slices.Equal(pids, []int{1, 2, 42, 4242, 5000}) {
		t.Fatalf("pids = %v", pids)
	}
	got := *findPID(table, 42)
	want := Process{
		PID: 42, PPID: 1, UID: 33, Name: "my (weird) app", Cmdline: []string{"nginx: worker process"}, State: "R",
		StartTime: 1700000000_000 + 50_000, Threads: 3, CPUUser: 2.5, CPUSystem: 1.3,
		RSS: 2560 * 4096, VSZ: 104857600, Swap: 17 * 1024, ReadBytes: 1 << 20, WriteBytes: 2 << 20,
		Cgroup: "system.nginx", CantalPath: "/run/cantal/nginx", CantalAppName: "web",
	}
	if !equalProcess(got, want) {
		t.Errorf("process 42 =\n%+v; want\n%+v", got, want)
	}
	if k := findPID(table, 2); k.Cmdline != nil || k.Cgroup != "" || k.Swap != 0 {
		t.Errorf("kernel thread = %+v", *k)
	}
	if c := findPID(table, 4242); c.Cgroup != "docker.abc123" || c.CantalPath != "/tmp/x" || c.UID != 1000 {
		t.Errorf("container process = %+v", *c)
	}
	if u := findPID(table, 5000); u.Cgroup != "user" {
		t.Errorf("user session process cgroup = %q; want user", u.Cgroup)
	}

	vals := map[string]uint64{
		`{"cgroup":"system.nginx","metric":"process.cpu.user_ms","pid":"42","process":"my (weird) app"}`:    2500,
		`{"cgroup":"system.nginx","metric":"process.memory.rss","pid":"42","process":"my (weird) app"}`:     2560 * 4096,
		`{"cgroup":"system.nginx","metric":"process.io.write_bytes","pid":"42","process":"my (weird) app"}`: 2 << 20,
		`{"cgroup":"system.nginx","metric":"process.threads","pid":"42","process":"my (weird) app"}`:        3,
		`{"metric":"process.memory.vsize","pid":"1","process":"init"}`:                                      20000000,
		// cgroups: v2 cpu.stat wins over cpuacct, v1 memory fills in, "no limit" is left out.
		`{"cgroup":"system.nginx","metric":"cgroup.cpu.usage_ms"}`:  2500,
		`{"cgroup":"system.nginx","metric":"cgroup.cpu.system_ms"}`: 1000,
		`{"cgroup":"system.nginx","metric":"cgroup.memory.usage"}`:  10485760,
		`{"cgroup":"system.nginx","metric":"cgroup.memory.anon"}`:   8192,
		`{"cgroup":"system.nginx","metric":"cgroup.memory.file"}`:   4096,
		`{"cgroup":"system.nginx","metric":"cgroup.processes"}`:     1,
		`{"cgroup":"docker.abc123","metric":"cgroup.memory.usage"}`: 2097152,
		`{"cgroup":"docker.abc123","metric":"cgroup.memory.limit"}`: 104857600,
		`{"cgroup":"docker.abc123","metric":"cgroup.memory.anon"}`:  2048,
		// v1 cpu.stat (the unified one has no CFS figures), throttled_time in ns
		`{"cgroup":"system.nginx","metric":"cgroup.cpu.periods"}`:           100,
		`{"cgroup":"system.nginx","metric":"cgroup.cpu.throttled_periods"}`: 40,
		`{"cgroup":"system.nginx","metric":"cgroup.cpu.throttled_ms"}`:      2000,
		`{"cgroup":"docker.abc123","metric":"cgroup.memory.oom_kill"}`:      3,
		// usage less total_inactive_file
		`{"cgroup":"docker.abc123","metric":"cgroup.memory.working_set"}`: 1048576,
		`{"cgroup":"user","metric":"cgroup.cpu.user_ms"}`:                 600,
		`{"cgroup":"user","metric":"cgroup.processes"}`:                   1,
	}
	for k, v := range vals {
		if got, ok := r.Values[k]; !ok || got != v {
			t.Errorf("series %s = %d, %v; want %d", k, got, ok, v)
		}
	}
	for _, absent := range []string{
		`{"cgroup":"system.nginx","metric":"cgroup.memory.limit"}`,
		`{"cgroup":"docker.abc123","metric":"cgroup.cpu.usage_ms"}`, // its cpuacct cgroup is the root: that is the machine, not the container
	} {
		if _, ok := r.Values[absent]; ok {
			t.Errorf("series %s should not exist", absent)
		}
	}
}

func equalProcess(a, b Process) bool {
	return reflect.DeepEqual(a, b)
}

// copyTree copies a fixture directory so that a test may change it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := os.CopyFS(dst, os.DirFS(src))
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestProcessesChurn(t *testing.T) {
	proc := copyTree(t, "testdata/proc")
	opt := fixtureOptions()
	opt.Proc = proc
	p := NewProcesses(opt)
	r := series.NewRecorder()
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(p.procs) != 5 {
		t.Fatalf("%d processes cached", len(p.procs))
	}
	envCalls := p.procs[42].env

	// pid 4242 exits, pid 42's environment changes on disk (not re-read: same process), pid 7
	// appears and vanishes between listing and reading (stat missing).
	if err := os.RemoveAll(filepath.Join(proc, "4242")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "42", "environ"), []byte("CANTAL_PATH=/changed\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proc, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	r2 := series.NewRecorder()
	if err := p.Collect(context.Background(), r2); err != nil {
		t.Fatal(err)
	}
	if len(r2.Problems) != 0 {
		t.Errorf("a vanished process is not a problem: %v", r2.Problems)
	}
	if len(p.procs) != 4 || p.procs[4242] != nil {
		t.Errorf("pid 4242 still cached after exit")
	}
	if _, ok := p.cg.byName["docker.abc123"]; ok {
		t.Errorf("cgroup of the exited process still cached")
	}
	if got := findPID(p.Table(), 42).CantalPath; got != envCalls.Path {
		t.Errorf("environ re-read for the same (pid, start time): CantalPath %q", got)
	}

	// The same pid with a new start time is a new process: environ is read again.
	stat := readFixture(t, "proc/42/stat")
	newStat := []byte(string(stat[:len(stat)-1]))
	newStat = []byte(replaceField(string(newStat), 22, "6000"))
	if err := os.WriteFile(filepath.Join(proc, "42", "stat"), newStat, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Collect(context.Background(), r2); err != nil {
		t.Fatal(err)
	}
	if got := findPID(p.Table(), 42); got.CantalPath != "/changed" || got.StartTime != 1700000000_000+60_000 {
		t.Errorf("pid reuse: CantalPath %q StartTime %d", got.CantalPath, got.StartTime)
	}
}

// replaceField replaces kfile.Field n (1-based, proc(5) numbering) of a stat line without a space in
// its comm... or with one: it counts from the closing parenthesis.
func replaceField(stat string, n int, v string) string {
	i := len(stat) - 1
	for stat[i] != ')' {
		i--
	}
	fields := splitSpace(stat[i+2:])
	fields[n-3] = v
	out := stat[:i+2]
	for j, f := range fields {
		if j > 0 {
			out += " "
		}
		out += f
	}
	return out + "\n"
}

func splitSpace(s string) []string {
	var out []string
	for len(s) > 0 {
		j := 0
		for j < len(s) && s[j] != ' ' {
			j++
		}
		out = append(out, s[:j])
		if j == len(s) {
			break
		}
		s = s[j+1:]
	}
	return out
}

func TestProcessesTableConcurrent(t *testing.T) {
	p := NewProcesses(fixtureOptions())
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			for _, pr := range p.Table() {
				if pr.PID == 0 || pr.Name == "" {
					t.Errorf("torn row %+v", pr)
					return
				}
			}
		}
	}()
	for range 50 {
		if err := p.Collect(ctx, series.NewRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}

func TestCollectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := NewProcesses(fixtureOptions())
	if err := p.Collect(ctx, series.NewRecorder()); err == nil {
		t.Errorf("Processes.Collect with a cancelled context: nil error")
	}
	if len(p.Table()) != 0 {
		t.Errorf("a cancelled scan published a table")
	}
}

func TestProcessesStableRefs(t *testing.T) {
	proc := copyTree(t, "testdata/proc")
	// A command name that is not UTF-8 is sanitised in labels, and must not look like a new
	// process on every scan.
	if err := os.MkdirAll(filepath.Join(proc, "77"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"stat":    "77 (bad\xff) S 1 77 77 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 700 1000 10 0 0 0 0 0\n",
		"status":  "Uid:\t5\t5\t5\t5\n",
		"io":      "read_bytes: 0\nwrite_bytes: 0\n",
		"cgroup":  "0::/\n",
		"cmdline": "x\x00",
		"environ": "",
	} {
		c := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\xff`, "\xff", `\x00`, "\x00").Replace(content)
		if err := os.WriteFile(filepath.Join(proc, "77", name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opt := fixtureOptions()
	opt.Proc = proc
	p := NewProcesses(opt)
	r := &countingSink{Recorder: series.NewRecorder()}
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.calls != countCgroupRefs(p) {
		t.Errorf("first scan made %d Series calls; want only the %d cgroup ones (process series start at the second scan)", r.calls, countCgroupRefs(p))
	}
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := findPID(p.Table(), 77); got == nil || got.Name != "bad\uFFFD" {
		t.Fatalf("pid 77 = %+v", got)
	}
	first := r.calls
	if first != len(p.procs)*pmNum+countCgroupRefs(p) {
		t.Errorf("%d Series calls for %d processes", first, len(p.procs))
	}
	for range 3 {
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if r.calls != first {
		t.Errorf("later scans called Sink.Series %d more times; want cached Refs", r.calls-first)
	}
}

// countingSink counts Series calls.
type countingSink struct {
	*series.Recorder
	calls int
}

func (c *countingSink) Series(l series.Labels, k series.Kind) *series.Ref {
	c.calls++
	return c.Recorder.Series(l, k)
}

// countCgroupRefs counts the per-cgroup series, and the scan's own (ScanStats).
func countCgroupRefs(p *Processes) int {
	n := len(scanStatSeries)
	for _, cs := range p.cg.byName {
		for _, r := range cs.refs {
			if r != nil {
				n++
			}
		}
	}
	return n
}

// countKept counts the files Processes holds open.
func countKept(p *Processes) int {
	n := 0
	for _, st := range p.procs {
		for _, f := range st.files {
			if f.Open {
				n++
			}
		}
	}
	return n
}

func TestProcessesKeepOpenBudget(t *testing.T) {
	for _, keep := range []int{-1, 4, 0} {
		opt := fixtureOptions()
		opt.KeepOpen = keep
		p := NewProcesses(opt)
		var tables [][]Process
		for range 3 {
			r := series.NewRecorder()
			if err := p.Collect(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) != 0 {
				t.Errorf("KeepOpen %d: problems %v", keep, r.Problems)
			}
			tables = append(tables, p.Table())
		}
		limit := max(keep, 0)
		if keep == 0 {
			// The default budget is larger than the fixture needs: stat, io, status and cgroup
			// of each of its 5 processes.
			limit = 4 * len(tables[2])
			if limit != 20 {
				t.Fatalf("the fixture changed: %d files to keep; want 20", limit)
			}
		}
		if n := countKept(p); n != p.kept || n != limit {
			t.Errorf("KeepOpen %d: %d files open, counter says %d; want %d", keep, n, p.kept, limit)
		}
		for i := range tables[1] {
			tables[1][i].CPUPercent, tables[2][i].CPUPercent = 0, 0
		}
		if !reflect.DeepEqual(tables[1], tables[2]) {
			t.Errorf("KeepOpen %d: rereading kept files gave another table", keep)
		}
		if got := findPID(tables[2], 42); got == nil || got.Swap != 17*1024 || got.WriteBytes != 2<<20 {
			t.Errorf("KeepOpen %d: process 42 = %+v", keep, got)
		}
		p.Close()
		if n := countKept(p); n != 0 || p.kept != 0 {
			t.Errorf("KeepOpen %d: %d files open after Close (counter %d)", keep, n, p.kept)
		}
	}
}

func TestProcessesExitWithKeptFiles(t *testing.T) {
	// A real child: its kept files must read as gone once it exits and is reaped.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// A budget that covers every process on a busy machine (the default 4096 files cover
	// about 1300 processes; the child, started last, would be past it).
	p := NewProcesses(Options{KeepOpen: 9000})
	defer p.Close()
	if err := p.Collect(context.Background(), series.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	if findPID(p.Table(), pid) == nil || p.procs[pid] == nil || !p.procs[pid].files[pfStat].Open {
		t.Fatalf("child %d not scanned with kept files", pid)
	}
	// The command line of a process that is not an application is read at its second scan.
	if err := p.Collect(context.Background(), series.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	if got := findPID(p.Table(), pid); got == nil || !slices.Equal(got.Cmdline, []string{"sleep", "60"}) {
		t.Errorf("child Cmdline = %q", got.Cmdline)
	}
	cmd.Process.Kill()
	cmd.Wait()
	r := series.NewRecorder()
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if findPID(p.Table(), pid) != nil || p.procs[pid] != nil {
		t.Errorf("exited child %d still in the table", pid)
	}
	if n := countKept(p); n != p.kept {
		t.Errorf("%d files open, counter says %d", n, p.kept)
	}
	for src := range r.Problems {
		if src != "/proc/PID/io" {
			t.Errorf("problem %s: %v", src, r.Problems[src])
		}
	}
}

// TestProcessesIOOnActivity: a process's io file is read again at the scan after it used CPU,
// and otherwise only at its every-ioEvery-th scan.
func TestProcessesIOOnActivity(t *testing.T) {
	proc := copyTree(t, "testdata/proc")
	opt := fixtureOptions()
	opt.Proc = proc
	p := NewProcesses(opt)
	collect := func() *Process {
		t.Helper()
		r := series.NewRecorder()
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return findPID(p.Table(), 42)
	}
	setIO := func(write uint64) {
		t.Helper()
		io := strings.Replace(string(readFixture(t, "proc/42/io")), "write_bytes: 2097152", fmt.Sprintf("write_bytes: %d", write), 1)
		if err := os.WriteFile(filepath.Join(proc, "42", "io"), []byte(io), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := collect().WriteBytes; got != 2<<20 {
		t.Fatalf("first scan: write_bytes %d", got)
	}
	// Idle (the CPU times do not move): the new value waits for the periodic read.
	setIO(3 << 20)
	seen := false
	for range ioEvery {
		got := collect().WriteBytes
		periodic := (42+p.gen)%ioEvery == 0
		switch {
		case periodic && got != 3<<20:
			t.Errorf("periodic scan %d: write_bytes %d; want the new value", p.gen, got)
		case !periodic && !seen && got != 2<<20:
			t.Errorf("scan %d of an idle process: write_bytes %d; want the value read before", p.gen, got)
		}
		seen = seen || got == 3<<20
	}
	if !seen {
		t.Errorf("write_bytes not read again within %d scans", ioEvery)
	}
	// It runs (utime moves) and writes: read at the next scan, whichever it is.
	for range 2 {
		setIO(5 << 20)
		stat := replaceField(strings.TrimSuffix(string(readFixture(t, "proc/42/stat")), "\n"), 14, "400")
		if err := os.WriteFile(filepath.Join(proc, "42", "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := collect().WriteBytes; got != 5<<20 {
			t.Errorf("scan %d after the process ran: write_bytes %d; want %d", p.gen, got, 5<<20)
		}
		proc42 := readFixture(t, "proc/42/stat")
		os.WriteFile(filepath.Join(proc, "42", "stat"), proc42, 0o644)
		setIO(2 << 20)
		collect()
	}
}
