package procscan

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// idleFixture is testdata/proc with schedstat files: the agent's own (so that the kernel is
// taken to count run time) and pid 5000's (a single-threaded bash whose parent is pid 1).
func idleFixture(t *testing.T) (Options, func(pid, file, content string)) {
	t.Helper()
	proc := copyTree(t, "testdata/proc")
	write := func(pid, file, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(proc, pid, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("self", "schedstat", "1000 0 1\n")
	write("5000", "schedstat", "5000000 100 7\n")
	opt := fixtureOptions()
	opt.Proc = proc
	return opt, write
}

func TestProcessesReuseStatWhileIdle(t *testing.T) {
	opt, write := idleFixture(t)
	stat5000 := strings.TrimSuffix(string(readFixture(t, "proc/5000/stat")), "\n")
	p := NewProcesses(opt)
	collect := func() *Process { t.Helper(); return collectPID(t, p, 5000) }
	// Scans 1 and 2 read stat (the first has no schedstat to compare, the second sets it).
	for range 2 {
		if got := collect(); got == nil || got.CPUUser != 0.07 {
			t.Fatalf("scan %d: %+v", p.gen, got)
		}
	}
	// The stat line changes but schedstat says the process did not run: the scans between two
	// periodic reads keep the line read before, and one periodic read takes the new one.
	write("5000", "stat", replaceField(stat5000, 14, "9")+"\n")
	sawOld, sawNew := false, false
	for range statIdleEvery {
		got := collect()
		periodic := (5000+p.gen)%p.idleEvery() == 0
		switch {
		case got == nil:
			t.Fatalf("scan %d: pid 5000 missing", p.gen)
		case periodic && got.CPUUser != 0.09:
			t.Errorf("periodic scan %d: utime %v; want the new line's 0.09", p.gen, got.CPUUser)
		case !periodic && !sawNew && got.CPUUser != 0.07:
			t.Errorf("scan %d of a process that did not run: utime %v; want the line read before (0.07)", p.gen, got.CPUUser)
		}
		sawOld = sawOld || got.CPUUser == 0.07
		sawNew = sawNew || got.CPUUser == 0.09
	}
	if !sawOld || !sawNew {
		t.Errorf("within %d scans: old line seen %v, new line seen %v; want both", statIdleEvery, sawOld, sawNew)
	}
	reused := p.Stats().StatReused
	if reused < statIdleEvery-2 {
		t.Errorf("StatReused = %d after %d idle scans", reused, statIdleEvery)
	}
	if !p.procs[5000].files[pfSched].Open || p.procs[5000].files[pfStat].Open != (p.procs[5000].idle < statCloseIdle) {
		t.Errorf("kept files of an idle process: schedstat open %v, stat open %v (idle %d scans)",
			p.procs[5000].files[pfSched].Open, p.procs[5000].files[pfStat].Open, p.procs[5000].idle)
	}

	// It runs: the next scan, whichever it is, reads its stat line.
	for i, v := range []string{"11", "13"} {
		write("5000", "stat", replaceField(stat5000, 14, v)+"\n")
		write("5000", "schedstat", "600000"+v+" 100 8\n")
		want := map[string]float64{"11": 0.11, "13": 0.13}[v]
		if got := collect(); got.CPUUser != want {
			t.Errorf("run %d: utime %v after schedstat moved; want %v", i, got.CPUUser, want)
		}
	}
	if got := p.Stats().StatReused; got != reused {
		t.Errorf("StatReused went from %d to %d while the process ran", reused, got)
	}

	// With threads, schedstat (the main thread's) does not tell: stat is read at every scan.
	write("5000", "stat", replaceField(replaceField(stat5000, 20, "2"), 14, "15")+"\n")
	collect() // schedstat unchanged, the line reused unless periodic...
	write("5000", "schedstat", "700000 100 9\n")
	collect() // ...now read: 2 threads
	reused = p.Stats().StatReused
	for i := range 3 {
		write("5000", "stat", replaceField(replaceField(stat5000, 20, "2"), 14, []string{"17", "19", "21"}[i])+"\n")
		if got := collect(); got.Threads != 2 || got.CPUUser != []float64{0.17, 0.19, 0.21}[i] {
			t.Errorf("multi-threaded scan %d: threads %d, utime %v", i, got.Threads, got.CPUUser)
		}
	}
	if got := p.Stats().StatReused; got != reused {
		t.Errorf("StatReused went from %d to %d for a multi-threaded process", reused, got)
	}
	if p.procs[5000].files[pfSched].Open {
		t.Errorf("schedstat of a multi-threaded process kept open")
	}
}

// TestProcessesStatQuietCadence: while <proc>/vmstat shows no pages taken, the stat line of a
// process that does not run is read every statQuietEvery scans, not every statIdleEvery; pages
// taken bring the faster cadence back for statIdleEvery scans.
func TestProcessesStatQuietCadence(t *testing.T) {
	opt, write := idleFixture(t)
	stat5000 := strings.TrimSuffix(string(readFixture(t, "proc/5000/stat")), "\n")
	vmstat := string(readFixture(t, "proc/vmstat")) + "pswpout 0\npgsteal_kswapd 0\npgsteal_direct 0\nthp_collapse_alloc 26\n"
	write("", "vmstat", vmstat)
	p := NewProcesses(opt)
	utime := func() float64 {
		t.Helper()
		got := collectPID(t, p, 5000)
		if got == nil {
			t.Fatalf("scan %d: pid 5000 missing", p.gen)
		}
		return got.CPUUser
	}
	for p.gen < statIdleEvery+2 {
		utime()
	}
	// untilPeriodic scans until the scan that reads the line anyway (every `every` scans, which
	// idleEvery must say), which must show utime want; the scans before it show the old line.
	untilPeriodic := func(every uint64, old, want float64) {
		t.Helper()
		for {
			got := utime()
			if p.idleEvery() != every {
				t.Fatalf("scan %d: idleEvery %d; want %d", p.gen, p.idleEvery(), every)
			}
			if (5000+p.gen)%every == 0 {
				if got != want {
					t.Fatalf("periodic scan %d: utime %v, want the new line's %v", p.gen, got, want)
				}
				return
			}
			if got != old {
				t.Fatalf("scan %d (not a periodic one): utime %v, want the line read before (%v)", p.gen, got, old)
			}
		}
	}
	// No pages taken since the first scan: only a statQuietEvery-periodic scan reads the line.
	write("5000", "stat", replaceField(stat5000, 14, "9")+"\n")
	untilPeriodic(statQuietEvery, 0.07, 0.09)
	// Reclaim: pgsteal moves; the next statIdleEvery-periodic scan reads the line.
	write("5000", "stat", replaceField(stat5000, 14, "11")+"\n")
	write("", "vmstat", strings.Replace(vmstat, "pgsteal_kswapd 0", "pgsteal_kswapd 10", 1))
	untilPeriodic(statIdleEvery, 0.09, 0.11)
}

func TestProcessesReuseStatReparented(t *testing.T) {
	opt, write := idleFixture(t)
	// pid 6000: a child of 5000, sleeping through the test.
	proc := opt.Proc
	if err := os.CopyFS(filepath.Join(proc, "6000"), os.DirFS(filepath.Join(proc, "4242"))); err != nil {
		t.Fatal(err)
	}
	stat6000 := replaceField(replaceField(strings.TrimSuffix(string(readFixture(t, "proc/4242/stat")), "\n"), 4, "5000"), 22, "13000")
	stat6000 = strings.Replace(stat6000, "4242", "6000", -1)
	write("6000", "stat", stat6000+"\n")
	write("6000", "schedstat", "3000 10 2\n")
	p := NewProcesses(opt)
	collect := func() *Process { t.Helper(); return collectPID(t, p, 6000) }
	for range 3 {
		if got := collect(); got == nil || got.PPID != 5000 {
			t.Fatalf("scan %d: %+v", p.gen, got)
		}
	}
	for (6000+p.gen+1)%statIdleEvery == 0 || (6000+p.gen+1)%statQuietEvery == 0 { // the next scan must not be a periodic read
		collect()
	}
	before := p.Stats().StatReused
	// 5000 exits; the kernel gives 6000 to init, without 6000 running.
	if err := os.RemoveAll(filepath.Join(proc, "5000")); err != nil {
		t.Fatal(err)
	}
	write("6000", "stat", replaceField(stat6000, 4, "1")+"\n")
	if got := collect(); got == nil || got.PPID != 1 {
		t.Errorf("after its parent exited: %+v; want PPID 1", got)
	}
	if p.Stats().StatReused == before {
		t.Errorf("the scan did not reuse 6000's stat line: the test shows nothing")
	}
}

// TestProcessesReuseStatRealProc runs on the real /proc, with the scheduler counters from the
// BPF task iterator and, NoTaskIter, from each process's schedstat file.
func TestProcessesReuseStatRealProc(t *testing.T) {
	for _, noIter := range []bool{false, true} {
		t.Run(map[bool]string{false: "taskiter", true: "schedstat"}[noIter], func(t *testing.T) {
			testReuseStatRealProc(t, noIter)
		})
	}
}

func testReuseStatRealProc(t *testing.T, noIter bool) {
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { busy.Process.Kill(); busy.Wait() }()
	// Past the sleeper's exec and start-up: it sleeps from now on.
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleeper.Process.Pid)); string(b) == "sleep\n" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	p := NewProcesses(Options{NoTaskIter: noIter})
	defer p.Close()
	var first, last *Process
	reused, busyReused, want := 0, 0, 0
	// From schedstat files, scans 1 and 2 read the sleeper's line (no counters to compare yet);
	// the task iterator gives the counters from scan 1, so only scan 1 does. Of the others, each
	// reuses it but for the periodic reads (which depend on the pid).
	firstReuse := map[bool]int{true: 2, false: 1}[noIter]
	for i := range 6 {
		if err := p.Collect(context.Background(), series.NewRecorder()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = findPID(p.Table(), busy.Process.Pid)
		}
		if i >= firstReuse && (uint64(sleeper.Process.Pid)+p.gen)%p.idleEvery() != 0 {
			want++
		}
		if st := p.procs[sleeper.Process.Pid]; st != nil && st.idle > 0 {
			reused++
		}
		if st := p.procs[busy.Process.Pid]; st != nil && st.idle > 0 {
			busyReused++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.schedOK != 1 {
		t.Fatalf("this kernel's schedstat not taken as counting run time (schedOK %d)", p.schedOK)
	}
	if (p.taskIter == nil) != noIter {
		t.Fatalf("task iterator loaded: %v, with NoTaskIter %v (the tests run as root on a kernel with BTF)", p.taskIter != nil, noIter)
	}
	if st := p.procs[sleeper.Process.Pid]; st == nil || st.files[pfSched].Open == !noIter {
		t.Errorf("sleeper's schedstat file kept open: %v; want %v", st != nil && st.files[pfSched].Open, noIter)
	}
	if reused < want {
		t.Errorf("a sleeping process's stat line was reused in %d scans; want %d (state %+v)", reused, want, p.procs[sleeper.Process.Pid])
	}
	row := findPID(p.Table(), sleeper.Process.Pid)
	if row == nil || row.Name != "sleep" || row.State != "S" || row.PPID != os.Getpid() || row.Threads != 1 {
		t.Errorf("sleeping process's row %+v", row)
	}
	last = findPID(p.Table(), busy.Process.Pid)
	if first == nil || last == nil || last.CPUUser+last.CPUSystem <= first.CPUUser+first.CPUSystem || last.State != "R" {
		t.Errorf("a running process's CPU did not move: %+v then %+v", first, last)
	}
	if busyReused != 0 {
		t.Errorf("a running process's stat line was reused in %d scans: %+v", busyReused, p.procs[busy.Process.Pid])
	}
}

func TestProcessesIdleDetails(t *testing.T) {
	opt, write := idleFixture(t)
	const noSwap = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	write(".", "swaps", noSwap)
	p := NewProcesses(opt)
	collect := func() *Process { t.Helper(); return collectPID(t, p, 5000) }
	for range 3 {
		collect()
	}
	io := string(readFixture(t, "proc/5000/io"))
	status := string(readFixture(t, "proc/5000/status"))
	first := collect()
	// It does not run: neither its I/O nor its uid can change, and no swap is in use. Files
	// changed behind the scan's back are not read again, through every periodic slot of
	// ioEvery and statusIdleEvery.
	write("5000", "io", strings.Replace(io, "write_bytes: ", "write_bytes: 7", 1))
	write("5000", "status", strings.Replace(status, "VmSwap:", "VmSwap:\t99 kB\nX:", 1))
	for range statusIdleEvery + 1 {
		got := collect()
		if got.WriteBytes != first.WriteBytes || got.Swap != first.Swap {
			t.Fatalf("scan %d of a process that did not run, without swap in use: write_bytes %d, swap %d; want %d, %d",
				p.gen, got.WriteBytes, got.Swap, first.WriteBytes, first.Swap)
		}
	}
	// Swap in use: the periodic status read comes back.
	write(".", "swaps", noSwap+"/dev/sda2 partition 8388604 1024 -2\n")
	sawSwap := false
	for range statusIdleEvery {
		sawSwap = sawSwap || collect().Swap == 99<<10
	}
	if !sawSwap {
		t.Errorf("swap in use: status not read again within %d scans", statusIdleEvery)
	}
	// It runs (schedstat moves, not its CPU ticks): its I/O is read at that scan.
	write("5000", "schedstat", "5000001 100 8\n")
	if got := collect(); got.WriteBytes == first.WriteBytes {
		t.Errorf("scan after the process ran: write_bytes %d not read again", got.WriteBytes)
	}
}

func TestKeepOpenCap(t *testing.T) {
	for limit, want := range map[int]int{1024: 512, 2048: 1024, 4096: 3072, 20000: 15000, 65536: 49152, 1 << 20: 786432} {
		if got := keepOpenCap(limit); got != want {
			t.Errorf("keepOpenCap(%d) = %d; want %d", limit, got, want)
		}
	}
}

// collectPID runs one scan of p and returns pid's row (nil when it is not in the table).
func collectPID(t *testing.T, p *Processes, pid int) *Process {
	t.Helper()
	if err := p.Collect(context.Background(), series.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	return findPID(p.Table(), pid)
}

// TestProcessesTaskIterPIDs: with the task iterator, a scan takes its pids from the iteration:
// a new process is found and an exited one dropped without listing /proc or process events.
func TestProcessesTaskIterPIDs(t *testing.T) {
	p := NewProcesses(Options{})
	defer p.Close()
	collect := func() []Process {
		t.Helper()
		if err := p.Collect(context.Background(), series.NewRecorder()); err != nil {
			t.Fatal(err)
		}
		return p.Table()
	}
	collect()
	if p.taskIter == nil {
		t.Fatal("no task iterator (the tests run as root on a kernel with BTF)")
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	nobody := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60")
	if err := nobody.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { nobody.Process.Kill(); nobody.Wait() }()
	for i := 0; i < 100; i++ { // past setpriv's setresuid and exec
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", nobody.Process.Pid)); string(b) == "sleep\n" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The iterator gives the uid from a process's first scan on (status would wait for its
	// second), and status is not read for it while no swap is in use.
	table := collect()
	if got := findPID(table, child.Process.Pid); got == nil || got.UID != os.Getuid() {
		t.Errorf("the new process %d in its first scan: %+v; want uid %d", child.Process.Pid, got, os.Getuid())
	}
	if got := findPID(table, nobody.Process.Pid); got == nil || got.UID != 65534 {
		t.Errorf("a new process of nobody in its first scan: %+v; want uid 65534", got)
	}
	collect()
	if st := p.procs[nobody.Process.Pid]; st == nil || !st.details || st.haveStatus != p.swapInUse {
		t.Errorf("second scan of %d: state %+v; want details read, status read only if swap is in use (%v)", nobody.Process.Pid, st, p.swapInUse)
	}
	child.Process.Kill()
	child.Wait()
	if findPID(collect(), child.Process.Pid) != nil {
		t.Errorf("the process %d that exited is still in the table", child.Process.Pid)
	}
	if p.lists != 0 || p.events != nil {
		t.Errorf("%d listings of /proc, events %v; want neither", p.lists, p.events != nil)
	}
	if len(p.Table()) < 3 || len(p.Table()) != len(p.procs) || p.Len() != len(p.Table()) {
		t.Errorf("%d rows, %d processes known, Len %d", len(p.Table()), len(p.procs), p.Len())
	}
}
