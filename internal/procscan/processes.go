package procscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/taskiter"
	"golang.org/x/sys/unix"
)

// Process is one row of the process table. Its strings and Cmdline are shared between
// snapshots and must be treated as read-only.
type Process struct {
	PID, PPID, UID int      // UID is -1 until known: from the task iterator, or from status (at a process's second scan, unless it names a CANTAL_PATH)
	Name           string   // comm, the kernel's 15-byte command name
	Cmdline        []string // nil for kernel threads and zombies
	State          string   // one letter as in ps: R, S, D, Z, T, t, X, I, ...
	StartTime      int64    // unix ms
	Threads        int
	CPUUser        float64 // seconds
	CPUSystem      float64 // seconds
	CPUPercent     float64 // of one CPU, since the previous scan; 0 on a process's first scan
	RSS, VSZ, Swap uint64  // bytes
	ReadBytes      uint64  // bytes fetched from storage (0 when /proc/PID/io is unreadable)
	WriteBytes     uint64
	Cgroup         string // see the package's cgroup rules; "" for the root cgroup
	CantalPath     string // CANTAL_PATH from the process's environment at exec
	CantalAppName  string // CANTAL_APPNAME
}

// Per-process series, in the order of procState.refs.
const (
	pmUser = iota
	pmSystem
	pmRSS
	pmVSZ
	pmSwap
	pmThreads
	pmRead
	pmWrite
	pmNum
)

var processMetrics = [pmNum]struct {
	name string
	kind series.Kind
}{
	pmUser:    {"process.cpu.user_ms", series.Counter},
	pmSystem:  {"process.cpu.system_ms", series.Counter},
	pmRSS:     {"process.memory.rss", series.Level},
	pmVSZ:     {"process.memory.vsize", series.Level},
	pmSwap:    {"process.memory.swap", series.Level},
	pmThreads: {"process.threads", series.Level},
	pmRead:    {"process.io.read_bytes", series.Counter},
	pmWrite:   {"process.io.write_bytes", series.Counter},
}

// procState is what Processes remembers of a pid between scans. A pid is the same process
// while its start time is; an exec (a new comm) keeps the pid and start time but re-reads the
// command line and environment.
type procState struct {
	pid           int
	pidStr        string
	startTicks    uint64
	comm          string // as the kernel gives it, to notice an exec
	name          string // comm with invalid UTF-8 replaced
	cmdline       []string
	env           cantalEnv
	cgroup        *cgroupInfo
	refs          [pmNum]*series.Ref
	refsFor       string // cgroup name the refs were made with
	refsCtr       string // and container identity (cgroupInfo.ctrKey)
	files         [pfNum]kfile.Kept
	prevCPU       uint64 // utime+stime ticks at prevAt
	prevAt        time.Time
	scanmark.Mark        // the latest scan that saw it
	scans         uint64 // scans this process has been seen in
	uid           int    // from the task iterator at every scan (haveUID), else from status, see statusEvery
	haveUID       bool   // uid is from the task iterator
	swap          uint64 // from status
	haveStatus    bool
	readBytes     uint64 // from io, see ioEvery
	writeBytes    uint64
	haveIO        bool
	ioDenied      bool
	prevRSS       uint64       // RSS pages at prevAt
	stirred       bool         // CPU or RSS moved since status was last read
	last          pidStat      // the latest stat line read (without Comm; a procState is made from one), reused while the process does not run
	sched         pidSchedstat // at the latest schedstat read
	haveSched     bool         // sched is set
	noSched       bool         // its schedstat could not be read: its stat line is read at every scan
	idle          uint8        // consecutive scans its stat line was reused (see sleeping), up to 255
	schedNow      uint8        // what schedstat told in this scan: schedUntracked, schedQuiet or schedRan
	scanGen       uint64       // the latest scan that found it alive
	envDone       bool         // environ read since the process was new or exec'd
	details       bool         // status, io, cgroup and cmdline read since then (see Collect)
}

// app reports whether the process names a CANTAL_PATH: its details are never deferred or shed.
func (st *procState) app() bool { return st.env.Path != "" }

// Processes is a series.Collector that scans every /proc/PID, emits per-process series
// labelled {metric, pid, process, cgroup} and per-cgroup series labelled {metric, cgroup}
// (see cgroup_name.go for what a process's cgroup is), both with container, image and
// container_id when Options.Containers names the cgroup's container, and keeps the latest
// process table.
//
// Processes keeps up to Options.KeepOpen /proc files open between scans; Close releases them.
// Collect and Close must not be called concurrently; Table and AppendTable may be called from
// any goroutine at any time.
type Processes struct {
	opt     Options
	cg      *cgroupTracker
	procs   map[int]*procState
	gen     uint64
	kept    int   // files open in procs[*].files
	btimeMs int64 // boot time, read once so start times stay stable

	pids       []int
	forked     []int       // pids the process events announced since the last scan
	events     *procEvents // nil: list /proc at every scan
	evTried    bool
	taskIter   *taskiter.Iter // nil: read schedstat files (see taskiter.go)
	tasksTried bool
	tasks      []taskiter.Task // this scan's, in pid order
	taskAt     int             // index in tasks of the pid being scanned, when it is there
	passShift  int             // pids listed before the pass's first: 1 when pid 1 was added (see listPIDs)
	schedOK    int8            // 0: not checked yet; 1: <proc>/PID/schedstat counts run time; -1: it does not
	swapInUse  bool            // some swap was in use at the start of the scan (see readSwapInUse)
	// What readPagesTaken knows of <proc>/vmstat: the sum it watches, whether it was read, the
	// latest scan that saw it move (or could not tell), and a reused buffer.
	pagesTaken    uint64
	haveTaken     bool
	pagesTakenGen uint64
	lists         int // scans that listed /proc
	dirents       []byte
	path          []byte
	buf           []byte
	big           []byte

	budget time.Duration // see SetBudget; 0: none
	now    time.Time     // of the scan under way
	items  []scanItem    // owned by Collect
	stats  scanCounters

	statesState // Options.States (states.go)

	mu        sync.RWMutex
	published []Process // guarded by mu; never modified after publication until swapped out
	building  []Process // owned by Collect
}

// NewProcesses returns a process collector reading opt.Proc and opt.Sys.
func NewProcesses(opt Options) *Processes {
	opt = opt.withDefaults()
	return &Processes{
		opt:     opt,
		cg:      newCgroupTracker(opt),
		procs:   map[int]*procState{},
		dirents: make([]byte, 32<<10),
		buf:     make([]byte, 0, 4096),
	}
}

// Table returns a copy of the process table of the latest complete scan, sorted by pid. It is
// safe to call from any goroutine; the copy belongs to the caller (its strings and Cmdline
// slices are shared and read-only).
func (p *Processes) Table() []Process {
	return p.AppendTable(nil)
}

// Len returns the number of processes in the latest process table, without copying it. It is
// safe to call from any goroutine.
func (p *Processes) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.published)
}

// AppendTable appends the latest process table to dst and returns it, for callers that reuse a
// buffer. It is safe to call from any goroutine.
func (p *Processes) AppendTable(dst []Process) []Process {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append(dst, p.published...)
}

// isGone reports whether err means the process exited while being read.
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
}

// Collect implements series.Collector: one scan of every process.
func (p *Processes) Collect(ctx context.Context, sink series.Sink) error {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scan processes: %w", err)
	}
	procfd, err := kfile.OpenDir(p.opt.Proc)
	if err != nil {
		return fmt.Errorf("scan processes: %w", err)
	}
	defer unix.Close(procfd)
	if p.btimeMs == 0 {
		if err := p.readBtime(procfd); err != nil {
			return fmt.Errorf("scan processes: %w", err)
		}
	}
	p.swapInUse = p.readSwapInUse(procfd)
	if !p.tasksTried {
		p.openTasks(procfd, sink)
	}
	if p.taskIter != nil {
		p.readTasks(sink)
	}
	if err := p.listPIDs(procfd, sink); err != nil {
		return fmt.Errorf("scan processes: %w", err)
	}
	p.gen++
	p.readPagesTaken(procfd)
	now := time.Now()
	p.now = now
	p.items = p.items[:0]
	var sc scanCount
	for i, pid := range p.pids {
		if i&255 == 255 && ctx.Err() != nil {
			return fmt.Errorf("scan processes: %w", ctx.Err())
		}
		p.taskAt = i - p.passShift // with the task iterator, p.pids[i] is p.tasks[i-passShift].PID (see taskRec)
		p.scanPID(procfd, pid, sink, &sc)
	}
	p.fixReparented(procfd, sink)
	// The details of the other processes, the work first shed when the scan runs late: first
	// those never read (a process in its second scan, or one that exec'd), then the periodic
	// re-reads. What is not read keeps its previous value; a process whose details were never
	// read gets its series only once they are.
	var deadline time.Time
	if p.budget > 0 {
		deadline = start.Add(p.budget)
	}
	late, n := false, 0
	for pass := 0; pass < 2; pass++ {
		for i := range p.items {
			it := &p.items[i]
			if it.due == 0 || it.gone || it.st.details == (pass == 0) {
				continue
			}
			if n++; !late && !deadline.IsZero() && n&15 == 1 && time.Now().After(deadline) {
				late = true
			}
			if late {
				sc.shed++
				continue
			}
			p.readDetails(procfd, it, sink)
		}
	}
	table := p.building[:0]
	var ioDenied bool
	for i := range p.items {
		it := &p.items[i]
		if it.gone {
			continue
		}
		p.finish(it, sink)
		ioDenied = ioDenied || it.st.ioDenied
		table = append(table, it.row)
	}
	clear(p.items) // drop references to processes that may be gone by the next scan
	if p.opt.States {
		p.collectStates(procfd, table, sink)
	}
	p.stats.add(sc)
	p.stats.taskIter.Store(p.taskIter != nil)
	p.putStats(sink)
	if ioDenied {
		sink.Problem(p.opt.Proc+"/PID/io", "permission denied for some processes: their read and write bytes are missing (the agent is not root, or they are protected)")
	}
	scanmark.Sweep(p.procs, p.gen, func(_ int, st *procState) { p.closeFiles(st) })
	p.cg.collect(sink, p.gen)

	p.mu.Lock()
	p.published, p.building = table, p.published
	p.mu.Unlock()
	clear(p.building) // drop references to strings of processes that are gone
	p.building = p.building[:0]
	return nil
}

// listPIDs sets p.pids to the pids to read this scan: those of the task iterator's pass when it
// is loaded; else the processes known from the previous scan and those the process events
// announced since (see procEvents), or, when the events were just subscribed to, every
// listEvery scans, when events were lost or when there are no events, the listing of /proc.
func (p *Processes) listPIDs(procfd int, sink series.Sink) error {
	p.pids = p.pids[:0]
	p.passShift = 0
	if p.taskIter != nil {
		// This scan's pass of the task iterator has every process, in pid order, except, on
		// some kernels (6.18 here), the first task: pid 1, which is never gone while the
		// namespace lives, is then listed by itself and read without scheduler counters (see
		// sleeping).
		if len(p.tasks) == 0 || p.tasks[0].PID != 1 {
			p.pids = append(p.pids, 1)
			p.passShift = 1
		}
		for i := range p.tasks {
			p.pids = append(p.pids, p.tasks[i].PID)
		}
		return nil
	}
	list := true
	if p.events == nil && !p.evTried && p.opt.Proc == "/proc" {
		p.evTried = true
		ev, err := openProcEvents(250 * time.Millisecond)
		if err != nil {
			sink.Problem("process events", err.Error()+": listing /proc at every scan instead")
		}
		p.events = ev
	} else if p.events != nil {
		lost := p.events.drain(func(pid int) { p.forked = append(p.forked, pid) })
		list = lost || p.gen%listEvery == 0
	}
	if list {
		p.lists++
		var err error
		if p.pids, err = kfile.PIDDirs(procfd, p.dirents, p.pids); err != nil {
			return err
		}
	} else {
		for pid := range p.procs {
			p.pids = append(p.pids, pid)
		}
	}
	p.pids = append(p.pids, p.forked...)
	p.forked = p.forked[:0]
	slices.Sort(p.pids) // procfs lists pids in order already; other trees may not
	p.pids = slices.Compact(p.pids)
	return nil
}

func (p *Processes) readBtime(procfd int) error {
	p.path = append(p.path[:0], "stat\x00"...)
	b, err := kfile.ReadFileAt(procfd, p.path, &p.big, 4<<20)
	if err != nil {
		return fmt.Errorf("read %s/stat: %w", p.opt.Proc, err)
	}
	btime, err := kfile.ParseBtime(b)
	if err != nil {
		return err
	}
	if btime <= 0 {
		return fmt.Errorf("%s/stat has no btime", p.opt.Proc)
	}
	p.btimeMs = btime * 1000
	return nil
}

// pidPath sets p.path to "PID/file\0".
func (p *Processes) pidPath(pid int, file string) []byte {
	b := strconv.AppendInt(p.path[:0], int64(pid), 10)
	b = append(b, '/')
	b = append(b, file...)
	p.path = append(b, 0)
	return p.path
}

// readPIDFile reads PID/file into p.buf. gone is true when the process exited. single says a
// short read is the file's end (see preadAll: stat, status, io, cgroup, environ, cmdline), so no
// second read is needed: three system calls instead of four for a file read without a kept one.
func (p *Processes) readPIDFile(procfd, pid int, file string, limit int, single bool) (b []byte, gone bool, err error) {
	if single {
		b, err = kfile.ReadSingleAt(procfd, p.pidPath(pid, file), &p.buf, limit)
	} else {
		b, err = kfile.ReadFileAt(procfd, p.pidPath(pid, file), &p.buf, limit)
	}
	if err != nil {
		if isGone(err) {
			return nil, true, err
		}
		if errors.Is(err, kfile.ErrTooLong) {
			return b, false, err
		}
		return nil, false, fmt.Errorf("read %s/%d/%s: %w", p.opt.Proc, pid, file, err)
	}
	return b, false, nil
}

// Files of a process kept open between scans, in procState.files.
const (
	pfStat = iota
	pfIO
	pfStatus
	pfCgroup
	pfSched
	pfNum
)

var pidFiles = [pfNum]string{pfStat: "stat", pfIO: "io", pfStatus: "status", pfCgroup: "cgroup", pfSched: "schedstat"}

// readOccasional reads PID/status or PID/cgroup, which are read every few scans: through a
// kept file when the budget has room for all four files of every known process, else with
// open, read and close (closing a kept one), so that under heavy churn the budget goes to stat
// and io, which every scan reads. A kept file costs one pread instead of three system calls
// (about 4 instead of 14 µs here).
func (p *Processes) readOccasional(procfd, pid, file int, f *kfile.Kept, limit int) (b []byte, gone bool, err error) {
	if p.opt.KeepOpen >= pfNum*len(p.procs) {
		return p.readKept(procfd, pid, file, f, limit)
	}
	if f.Open {
		f.Close()
		p.kept--
	}
	return p.readPIDFile(procfd, pid, pidFiles[file], limit, true)
}

// cgroupEvery is how often (in scans) a known process's cgroup file is read again: processes
// are placed in their cgroup before they exec, and moves are rare, so each scan reads it for a
// thirtieth of the processes (and for every new one); a moved process's series follow within
// cgroupEvery scans (a minute at the default interval).
const cgroupEvery = 30

// statusEvery is how often (in scans) the status file (uid and swap) of a process whose CPU
// time or RSS moved since it was last read is read again, and statusIdleEvery that of any
// process: a process that neither runs nor has pages taken from it or given back changes
// neither its uid nor its swap. A process's swap and uid in the table are up to statusEvery
// scans old (20 s at the default interval) while it is active, up to statusIdleEvery (2 min)
// while it sleeps: status is the most expensive of the per-process files to generate (5.7 µs
// of kernel time here, against 4.3 for stat), and swap moves slowly. Nothing decides what to
// read on a process's behalf from this uid alone: package apps reads the current uid
// (ProcessUID) whenever it opens a file for a process.
const (
	statusEvery     = 10
	statusIdleEvery = 60
)

// ioEvery is how often (in scans) the io file of a process that used no CPU since the previous
// scan is read; a process whose utime+stime moved is read at every scan. A process that does
// not run causes no I/O of its own, and most processes of a machine sleep through most scans
// (io is 2.8 µs of kernel time per process here). The CPU times move in clock ticks (10 ms),
// so the I/O of a process that ran for less than a tick since the previous scan may show up
// to ioEvery scans (30 s at the default interval) late; its counter stays exact.
const ioEvery = 15

// readKept reads PID/file through the kept file f, opening it when needed and keeping it open
// while the budget allows. gone is true when the process exited.
func (p *Processes) readKept(procfd, pid, file int, f *kfile.Kept, limit int) (b []byte, gone bool, err error) {
	wasOpen := f.Open
	if !f.Open {
		if p.kept >= p.opt.KeepOpen {
			b, err = kfile.ReadFileAt(procfd, p.pidPath(pid, pidFiles[file]), &p.buf, limit)
			return p.readResult(pid, file, b, err)
		}
		p.kept++
	}
	b, err = f.Read(procfd, p.pidPath(pid, pidFiles[file]), &p.buf, limit, true)
	if !f.Open {
		p.kept--
	}
	if err == nil && len(b) == 0 && wasOpen {
		// A kept file of a process that exited reads as empty or ESRCH.
		return nil, true, nil
	}
	return p.readResult(pid, file, b, err)
}

func (p *Processes) readResult(pid, file int, b []byte, err error) ([]byte, bool, error) {
	switch {
	case err == nil:
		return b, false, nil
	case isGone(err):
		return nil, true, err
	case errors.Is(err, kfile.ErrTooLong):
		return b, false, err
	}
	return nil, false, fmt.Errorf("read %s/%d/%s: %w", p.opt.Proc, pid, pidFiles[file], err)
}

// forget closes the files of st and drops it.
func (p *Processes) forget(st *procState) {
	p.closeFiles(st)
	if p.procs[st.pid] == st {
		delete(p.procs, st.pid)
	}
}

// closeFiles closes the files kept open for st.
func (p *Processes) closeFiles(st *procState) {
	for i := range st.files {
		if st.files[i].Open {
			st.files[i].Close()
			p.kept--
		}
	}
}

// Close closes the /proc files kept open between scans and forgets every process. Collect may
// be called again afterwards. Close must not be called concurrently with Collect.
func (p *Processes) Close() error {
	for _, st := range p.procs {
		p.forget(st)
	}
	p.cg.closeAll()
	p.events.close()
	p.events, p.evTried = nil, false
	p.closeTasks()
	p.tasksTried = false
	return nil
}

// scanItem is one process in a scan, from its stat line to its row in the table.
type scanItem struct {
	st                    *procState
	row                   Process
	utime, stime, threads uint64
	due                   uint8 // detail reads still to do: dueStatus | dueIO | dueCgroup | dueCmdline
	first                 bool  // due are the first reads since the process was new or exec'd
	gone                  bool  // exited while being read
	reused                bool  // its stat line is the one of an earlier scan (see sleeping)
}

// Detail reads of a process, in scanItem.due.
const (
	dueStatus = 1 << iota
	dueIO
	dueCgroup
	dueCmdline
	dueAll = dueStatus | dueIO | dueCgroup | dueCmdline
)

// pfForkNoExec is the kernel's PF_FORKNOEXEC: the task forked and has not (yet) exec'd. Its
// environment and command line are still its parent's, and a read of them would wait for the
// exec it may be in the middle of.
const pfForkNoExec = 0x40

// scanPID reads one process's stat line and appends it to p.items, unless it vanished or could
// not be read (a problem is reported for the latter). The environment (to find applications) is
// read on the first scan the process has exec'd by; an application's details are read at once.
// The other processes' details are left in the item's due for Collect's second pass: none in
// a process's first scan (most short-lived processes never get a second), then the first read
// of each, then the periodic re-reads (statusEvery, ioEvery, cgroupEvery).
func (p *Processes) scanPID(procfd, pid int, sink series.Sink, sc *scanCount) {
	st := p.procs[pid]
	if st != nil {
		switch p.sleeping(procfd, st, sink) {
		case schedIdle:
			p.reuseStat(procfd, st, sink, sc)
			return
		case schedGone:
			// The process we knew exited; the pid may already belong to another one.
			p.forget(st)
			st = nil
		}
	}
	var b []byte
	var gone bool
	var err error
	if st != nil {
		b, gone, err = p.readKept(procfd, pid, pfStat, &st.files[pfStat], 4096)
		if gone {
			// The process we knew exited; the pid may already belong to another one.
			p.forget(st)
			st = nil
		}
	}
	var tmp kfile.Kept
	if st == nil {
		b, gone, err = p.readKept(procfd, pid, pfStat, &tmp, 4096)
		if gone {
			p.closeTmp(&tmp)
			return
		}
	}
	stat := &tmp
	if err != nil || len(b) == 0 {
		p.closeTmp(&tmp)
		if err == nil {
			return // an exiting process may read as empty
		}
		sink.Problem(fmt.Sprintf("%s/%d/stat", p.opt.Proc, pid), err.Error())
		return
	}
	ps, err := parsePIDStat(b)
	if err != nil {
		p.closeTmp(&tmp)
		sink.Problem(fmt.Sprintf("%s/%d/stat", p.opt.Proc, pid), err.Error())
		return
	}
	if st != nil && st.startTicks != ps.StartTicks {
		p.forget(st) // pid reused between two scans
		st = nil
	}
	if st == nil {
		st = &procState{pid: pid, pidStr: strconv.Itoa(pid), startTicks: ps.StartTicks}
		st.files[pfStat] = *stat
		p.procs[pid] = st
	}
	st.last, st.idle = ps, 0
	st.last.Comm = nil // b is reused by the next read
	if p.taskIter != nil && !st.haveSched {
		// New (or read without counters): its counters in this scan's iteration, which came
		// before its stat line was read, are the next scan's baseline (see sleeping).
		if t := p.taskRec(pid, st.startTicks); t != nil {
			st.sched, st.haveSched = pidSchedstat{RunNs: t.RunNs, Slices: t.Slices}, true
		}
	}
	if st.comm != string(ps.Comm) || st.prevAt.IsZero() { // no allocation when equal
		if st.comm != string(ps.Comm) {
			st.refs = [pmNum]*series.Ref{} // the process label changes
		}
		st.comm = string(ps.Comm)
		st.name = kfile.ValidString(ps.Comm)
		// New, or exec'd: its environment, command line and details are read afresh.
		st.envDone, st.details = false, false
		st.env, st.cmdline = cantalEnv{}, nil
	}
	it := p.addItem(st, &ps)
	if !st.envDone {
		if st.scans == 0 && ps.Flags&pfForkNoExec != 0 {
			sc.busy++ // forked, not exec'd yet: read at the next scan
		} else if !p.readEnv(procfd, st, sink) {
			it.gone = true
			return
		}
	}
	p.planDetails(procfd, it, &ps, sink, sc)
}

// addItem appends st's item for this scan, from its stat line ps, to p.items.
func (p *Processes) addItem(st *procState, ps *pidStat) *scanItem {
	st.scanGen = p.gen
	p.items = append(p.items, scanItem{st: st, utime: ps.UTime, stime: ps.STime, threads: ps.Threads})
	it := &p.items[len(p.items)-1]
	it.row = Process{
		PID: st.pid, PPID: ps.PPID, Name: st.name, State: stateString(ps.State),
		StartTime: p.btimeMs + int64(p.opt.ticksToMs(ps.StartTicks)),
		Threads:   int(ps.Threads),
		CPUUser:   float64(ps.UTime) / float64(p.opt.ClockTick),
		CPUSystem: float64(ps.STime) / float64(p.opt.ClockTick),
		RSS:       ps.RSSPages * uint64(p.opt.PageSize),
		VSZ:       ps.VSize,
	}
	return it
}

// planDetails sets it's due detail reads from its stat line ps and does them now for an
// application (see scanPID).
func (p *Processes) planDetails(procfd int, it *scanItem, ps *pidStat, sink series.Sink, sc *scanCount) {
	st, pid := it.st, it.st.pid
	cpu := ps.UTime + ps.STime
	moved := cpu != st.prevCPU || ps.RSSPages != st.prevRSS || st.schedNow == schedRan
	st.stirred = st.stirred || moved
	st.prevRSS = ps.RSSPages
	// With schedstat (st.schedNow set) whether the process ran since the previous scan is known
	// to the nanosecond; else from its CPU time, in clock ticks, and the periodic reads catch a
	// process that ran for less than a tick. A process that did not run changed neither its uid
	// nor its I/O; its swap can grow (swap-out), which only matters while swap is in use.
	tracked := st.schedNow != schedUntracked
	// The task iterator gives the uid at every scan: status is then read only for the swap,
	// which is 0 while no swap is in use.
	needStatus := true
	if p.taskIter != nil {
		if t := p.taskRec(pid, st.startTicks); t != nil {
			st.uid, st.haveUID = int(t.UID), true
			needStatus = p.swapInUse
		}
	}
	switch {
	case !st.details:
		it.due, it.first = dueAll, true
		if !needStatus {
			it.due &^= dueStatus
		}
	default:
		k := uint64(pid) + p.gen
		if needStatus && (st.stirred && k%statusEvery == 0 || k%statusIdleEvery == 0 && (p.swapInUse || !tracked)) {
			it.due |= dueStatus
		}
		if !st.haveIO || cpu != st.prevCPU || st.schedNow == schedRan || !tracked && k%ioEvery == 0 {
			it.due |= dueIO
		}
		if st.cgroup == nil || (uint64(pid)+p.gen)%cgroupEvery == 0 {
			it.due |= dueCgroup
		}
	}
	switch {
	case st.app():
		p.readDetails(procfd, it, sink) // never deferred nor shed
	case st.scans == 0 && it.due != 0:
		it.due = 0
		sc.deferred++
	}
}

// readDetails does it's due detail reads. It marks it gone when the process exited.
func (p *Processes) readDetails(procfd int, it *scanItem, sink series.Sink) {
	st, pid := it.st, it.st.pid
	var b []byte
	var gone bool
	var err error
	if it.due&dueStatus != 0 {
		if b, gone, err = p.readOccasional(procfd, pid, pfStatus, &st.files[pfStatus], 16<<10); gone {
			it.gone = true
			return
		} else if err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/status", p.opt.Proc, pid), err.Error())
		} else if s, err := parsePIDStatus(b); err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/status", p.opt.Proc, pid), err.Error())
		} else {
			st.uid, st.swap, st.haveStatus, st.stirred = int(s.UID), s.Swap, true, false
		}
	}
	if it.due&dueIO != 0 {
		if b, gone, err = p.readIO(procfd, st); gone {
			it.gone = true
			return
		} else if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			st.ioDenied, st.haveIO = true, true
		} else if err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/io", p.opt.Proc, pid), err.Error())
		} else if io, err := parsePIDIO(b); err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/io", p.opt.Proc, pid), err.Error())
		} else {
			st.readBytes, st.writeBytes, st.haveIO, st.ioDenied = io.ReadBytes, io.WriteBytes, true, false
		}
	}
	if it.due&dueCgroup != 0 {
		if b, gone, err = p.readOccasional(procfd, pid, pfCgroup, &st.files[pfCgroup], 64<<10); gone {
			it.gone = true
			return
		} else if err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/cgroup", p.opt.Proc, pid), err.Error())
		} else if ci, err := p.cg.intern(b, p.gen); err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/cgroup", p.opt.Proc, pid), err.Error())
		} else {
			st.cgroup = ci
		}
	}
	if it.due&dueCmdline != 0 {
		b, gone, err = p.readPIDFile(procfd, pid, "cmdline", p.opt.MaxRead, true)
		switch {
		case gone:
			it.gone = true
			return
		case err != nil && !errors.Is(err, kfile.ErrTooLong):
			sink.Problem(fmt.Sprintf("%s/%d/cmdline", p.opt.Proc, pid), err.Error())
		default:
			st.cmdline = parseCmdline(b)
		}
	}
	if it.first {
		st.details = true
	}
	it.due = 0
}

// readIO reads PID/io: through a kept file while the budget has room for the stat and io files
// of every known process, else with open, read and close (closing a kept one), so that under
// heavy churn the budget goes to stat, which every scan reads for every process.
func (p *Processes) readIO(procfd int, st *procState) ([]byte, bool, error) {
	f := &st.files[pfIO]
	if p.opt.KeepOpen >= 2*len(p.procs) {
		return p.readKept(procfd, st.pid, pfIO, f, 4096)
	}
	if f.Open {
		f.Close()
		p.kept--
	}
	return p.readPIDFile(procfd, st.pid, "io", 4096, true)
}

// finish completes it's row from what is known of the process and puts its series.
func (p *Processes) finish(it *scanItem, sink series.Sink) {
	st, row := it.st, &it.row
	row.UID, row.Swap = st.uid, st.swap
	if !st.haveStatus && !st.haveUID {
		row.UID = -1 // not read yet: a caller that sees only its own processes does not see it
	}
	row.ReadBytes, row.WriteBytes = st.readBytes, st.writeBytes
	if st.cgroup != nil {
		st.cgroup.See(p.gen)
		row.Cgroup = st.cgroup.Name
		p.cg.count(st.cgroup, p.gen, st.pid)
	}
	row.Cmdline, row.CantalPath, row.CantalAppName = st.cmdline, st.env.Path, st.env.AppName

	cpu := it.utime + it.stime
	if !st.prevAt.IsZero() && cpu >= st.prevCPU {
		if dt := p.now.Sub(st.prevAt).Seconds(); dt > 0 {
			row.CPUPercent = float64(cpu-st.prevCPU) / float64(p.opt.ClockTick) / dt * 100
		}
	}
	st.prevCPU, st.prevAt = cpu, p.now
	st.See(p.gen)
	st.scans++
	if st.scans < 2 || !st.details {
		// A process's series start at its second scan: one that lives less than a scan
		// interval has no rate to show, and under heavy churn (thousands of short-lived
		// processes) registering eight series for each would grow the history's series
		// table for an hour. It is in the process table from its first scan. Its series
		// also wait for its details (its cgroup labels them), which a late scan may shed.
		return
	}

	if ctr := st.cgroup.ctrKey(); st.refsFor != row.Cgroup || st.refsCtr != ctr {
		st.refs = [pmNum]*series.Ref{}
		st.refsFor, st.refsCtr = row.Cgroup, ctr
	}
	vals := [pmNum]uint64{
		pmUser:    p.opt.ticksToMs(it.utime),
		pmSystem:  p.opt.ticksToMs(it.stime),
		pmRSS:     row.RSS,
		pmVSZ:     row.VSZ,
		pmSwap:    row.Swap,
		pmThreads: it.threads,
		pmRead:    row.ReadBytes,
		pmWrite:   row.WriteBytes,
	}
	for m, v := range vals {
		r := st.refs[m]
		if r == nil {
			l := series.Labels{"metric": processMetrics[m].name, "pid": st.pidStr, "process": st.name}
			if row.Cgroup != "" {
				l["cgroup"] = row.Cgroup
			}
			addContainerLabels(l, st.cgroup)
			r = sink.Series(l, processMetrics[m].kind)
			st.refs[m] = r
		}
		sink.Put(r, v)
	}
}

// closeTmp closes a stat file opened for a process that was then not kept.
func (p *Processes) closeTmp(f *kfile.Kept) {
	if f.Open {
		f.Close()
		p.kept--
	}
}

// readEnv reads the environment of a new (or newly exec'd) process for its CANTAL_PATH. It
// returns false when the process exited.
func (p *Processes) readEnv(procfd int, st *procState, sink series.Sink) bool {
	b, gone, err := p.readPIDFile(procfd, st.pid, "environ", p.opt.MaxRead, true)
	switch {
	case gone:
		return false
	case errors.Is(err, kfile.ErrTooLong):
		// The last variable may be cut: keep only the complete ones.
		if i := lastIndexByte(b, 0); i >= 0 {
			st.env = parseEnviron(b[:i])
		}
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		// Not root, or a process we may not inspect: it exports no metrics as far as we know.
	case err != nil:
		sink.Problem(fmt.Sprintf("%s/%d/environ", p.opt.Proc, st.pid), err.Error())
	default:
		st.env = parseEnviron(b)
	}
	st.envDone = true
	return true
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// stateString returns the one-letter state without allocating for the known letters.
func stateString(c byte) string {
	const letters = "RSDZTtXxKWPI"
	for i := 0; i < len(letters); i++ {
		if letters[i] == c {
			return letters[i : i+1]
		}
	}
	return kfile.ValidString([]byte{c})
}

// ProcessUID returns the real uid of process pid now, read from proc's PID/status (proc is the
// proc root, "/proc"). Errors wrap fs.ErrNotExist when the process is gone. It is for the rare
// moments a caller acts on a process's behalf (package apps opening a file for it): a process
// table's UID may be several scans old. Safe for concurrent use.
func ProcessUID(proc string, pid int) (int, error) {
	path := proc + "/" + strconv.Itoa(pid) + "/status"
	var buf []byte
	b, err := kfile.ReadFileAt(unix.AT_FDCWD, append([]byte(path), 0), &buf, 16<<10)
	if err != nil {
		if isGone(err) {
			return 0, fmt.Errorf("uid of pid %d: %w", pid, fs.ErrNotExist)
		}
		return 0, fmt.Errorf("uid of pid %d: %w", pid, err)
	}
	s, err := parsePIDStatus(b)
	if err != nil {
		return 0, fmt.Errorf("uid of pid %d: %w", pid, err)
	}
	return int(s.UID), nil
}
