package procscan

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// A scan re-reads the stat line of every process, and on a machine of thousands of processes
// that is most of its cost: generating a stat line takes the kernel about 5 µs (it formats 52
// fields and walks the process's threads and memory map), against about 1.4 µs for the
// scheduler's three counters of /proc/PID/schedstat. Most processes sleep through most scans,
// and a process that has not been given a CPU since the previous scan cannot have changed its
// CPU times, state, thread count, command or memory map. So for a single-threaded process
// (schedstat counts the main thread only) the scan reads schedstat first and reuses the stat
// line of the previous scan when the process has not run (its run time and number of slices are
// those of the previous read).
//
// What a process's stat line can show changed without the process running, and how it is caught:
//   - its resident memory can shrink when the kernel reclaims or swaps out its pages (and grow
//     when khugepaged collapses them into a huge page): the stat line of a process that does not
//     run is read anyway every statIdleEvery scans while <proc>/vmstat shows such work in the
//     last statIdleEvery scans, every statQuietEvery scans otherwise (see readPagesTaken). The
//     rarer ways (another process truncating a file it maps, or writing into its memory) show
//     within statQuietEvery scans;
//   - its parent can exit, making it the child of init or of a subreaper: a reused line whose
//     parent is not alive in this scan is read again (fixReparented);
//   - a zombie, or a process whose main thread has exited while another runs on, is always read.
//
// The stat file of a process whose line was reused statCloseIdle scans in a row is closed (a
// kept /proc file holds a page of kernel memory): a sleeping process then costs one kept file,
// a running one two.

// statIdleEvery is how often (in scans) the stat line of a process that has not run is read
// anyway: its RSS (and swap, see statusIdleEvery) may shrink while it sleeps when memory is
// reclaimed, and shows so up to statIdleEvery scans (30 s at the default interval) late, as
// the I/O of a process that ran for less than a clock tick did before schedstat (ioEvery).
const statIdleEvery = 15

// statQuietEvery is statIdleEvery while the kernel has neither reclaimed, swapped out nor
// collapsed pages for statIdleEvery scans: a sleeping process's RSS then moves only in the rare
// ways listed above. It is statusIdleEvery, the cadence of a sleeping process's status.
const statQuietEvery = statusIdleEvery

// statCloseIdle is how many scans in a row a process's stat line is reused before its kept stat
// file is closed.
const statCloseIdle = 2

// What sleeping learnt of a process in this scan, in procState.schedNow.
const (
	schedUntracked = iota // nothing: it has threads, or no schedstat baseline yet, or the kernel has none
	schedQuiet            // it has not run since the previous scan
	schedRan              // it has
)

// schedVerdict is what sleeping tells of a process.
type schedVerdict uint8

const (
	schedRead schedVerdict = iota // read its stat line
	schedIdle                     // it has not run since the previous scan: reuse the line
	schedGone                     // it exited; its pid may be another process's now
)

// sleeping looks at the scheduler counters of st, a process known from earlier scans (in this
// scan's pass of the task iterator, else in its schedstat file), when they can tell
// whether the process ran since the previous scan, and says whether its stat line is to be
// read. It must be called before the stat line is read in a scan, so that a process that runs
// between the two reads shows as having run at the next scan.
func (p *Processes) sleeping(procfd int, st *procState, sink series.Sink) schedVerdict {
	if p.schedOK == 0 {
		p.checkSched()
	}
	f := &st.files[pfSched]
	st.schedNow = schedUntracked
	if p.schedOK < 0 || st.noSched || !st.envDone || st.last.Threads != 1 ||
		st.last.State == 'Z' || st.last.State == 'X' || (p.taskIter == nil && !f.Open && p.kept >= p.opt.KeepOpen) {
		if f.Open { // it has threads now: schedstat would not tell
			f.Close()
			p.kept--
		}
		st.haveSched = false
		return schedRead
	}
	var s pidSchedstat
	if p.taskIter != nil {
		if f.Open { // read before the iterator was loaded
			f.Close()
			p.kept--
		}
		t := p.taskRec(st.pid, st.startTicks)
		if t == nil && !p.inPass(st.pid) {
			// Listed beside the pass (pid 1, see listPIDs): no counters, its stat is read.
			st.haveSched = false
			return schedRead
		}
		if t == nil {
			// The pass (this scan's list of pids) has another process under its pid: it
			// exited since the previous scan.
			return schedGone
		}
		s = pidSchedstat{RunNs: t.RunNs, Slices: t.Slices}
	} else {
		b, gone, err := p.readKept(procfd, st.pid, pfSched, f, 256)
		switch {
		case gone:
			return schedGone
		case err != nil:
			st.noSched = true // the stat line's read reports what is wrong, if anything is
			return schedRead
		}
		if s, err = parsePIDSchedstat(b); err != nil {
			st.noSched = true
			sink.Problem(fmt.Sprintf("%s/%d/schedstat", p.opt.Proc, st.pid), err.Error())
			return schedRead
		}
	}
	prev, had := st.sched, st.haveSched
	st.sched, st.haveSched = s, true
	switch {
	case !had || s.RunNs == 0:
		return schedRead
	case s != prev:
		st.schedNow = schedRan
		return schedRead
	}
	st.schedNow = schedQuiet
	if (uint64(st.pid)+p.gen)%p.idleEvery() == 0 {
		return schedRead
	}
	return schedIdle
}

// idleEvery is how often, in this scan, the stat line of a process that does not run is read
// anyway: statIdleEvery within statIdleEvery scans of pages taken (see readPagesTaken), else
// statQuietEvery.
func (p *Processes) idleEvery() uint64 {
	if p.gen-p.pagesTakenGen < statIdleEvery {
		return statIdleEvery
	}
	return statQuietEvery
}

// checkSched sets p.schedOK: whether this kernel's schedstat counts run time (it reads "0 0 0"
// without CONFIG_SCHED_INFO's accounting, and is missing from other trees such as test fixtures).
func (p *Processes) checkSched() {
	p.schedOK = -1
	b, err := kfile.ReadFileAt(unix.AT_FDCWD, []byte(p.opt.Proc+"/self/schedstat\x00"), &p.buf, 256)
	if err != nil {
		return
	}
	if s, err := parsePIDSchedstat(b); err == nil && s.RunNs > 0 && s.Slices > 0 {
		p.schedOK = 1
	}
}

// reuseStat adds st's item for this scan from its previous stat line (sleeping said it has not
// run since).
func (p *Processes) reuseStat(procfd int, st *procState, sink series.Sink, sc *scanCount) {
	sc.reused++
	if st.idle < 255 {
		st.idle++
	}
	if st.idle >= statCloseIdle && st.files[pfStat].Open {
		st.files[pfStat].Close()
		p.kept--
	}
	ps := st.last
	it := p.addItem(st, &ps)
	it.reused = true
	p.planDetails(procfd, it, &ps, sink, sc)
}

// fixReparented reads again the stat line of each process of this scan whose line was reused
// and whose parent, as that line says, is not alive in this scan (or is a younger process that
// took its pid): the kernel has given it another parent without it running.
func (p *Processes) fixReparented(procfd int, sink series.Sink) {
	for i := range p.items {
		it := &p.items[i]
		if !it.reused || it.gone || it.row.PPID <= 0 {
			continue
		}
		if par := p.procs[it.row.PPID]; par != nil && par.scanGen == p.gen && par.startTicks <= it.st.startTicks {
			continue
		}
		st := it.st
		b, gone, err := p.readKept(procfd, st.pid, pfStat, &st.files[pfStat], 4096)
		switch {
		case gone:
			it.gone = true
			continue
		case err != nil:
			sink.Problem(fmt.Sprintf("%s/%d/stat", p.opt.Proc, st.pid), err.Error())
			continue
		case len(b) == 0:
			continue
		}
		ps, err := parsePIDStat(b)
		if err != nil {
			sink.Problem(fmt.Sprintf("%s/%d/stat", p.opt.Proc, st.pid), err.Error())
			continue
		}
		if ps.StartTicks != st.startTicks {
			it.gone = true // it exited and its pid was reused since the scan began
			continue
		}
		it.row.PPID, st.last.PPID = ps.PPID, ps.PPID
	}
}

// readSwapInUse reports whether any swap is in use (the Used column of <proc>/swaps): while none
// is, no process has swap, and the status file of a process that has not run since it was last
// read has nothing new. When the file cannot be read or parsed, it reports true.
func (p *Processes) readSwapInUse(procfd int) bool {
	p.path = append(p.path[:0], "swaps\x00"...)
	b, err := kfile.ReadFileAt(procfd, p.path, &p.buf, 64<<10)
	if err != nil {
		return true
	}
	used, err := parseSwapsUsed(b)
	return err != nil || used > 0
}

// readPagesTaken sets p.pagesTakenGen to this scan when <proc>/vmstat shows that the kernel
// reclaimed pages (pgsteal_*), swapped them out (pswpout) or collapsed them into huge pages
// (thp_collapse_alloc) since the previous scan, or when it cannot tell (the file is missing or
// unreadable, or this is the first scan): the work that changes the RSS of a process that does
// not run (see sleeping). On a machine under memory pressure it is every scan; on one with
// memory to spare, almost never.
func (p *Processes) readPagesTaken(procfd int) {
	p.path = append(p.path[:0], "vmstat\x00"...)
	b, err := kfile.ReadFileAt(procfd, p.path, &p.buf, 64<<10)
	var sum uint64
	if err == nil {
		sum, err = parsePagesTaken(b)
	}
	if err != nil || !p.haveTaken || sum != p.pagesTaken {
		p.pagesTakenGen = p.gen
	}
	p.pagesTaken, p.haveTaken = sum, err == nil
}

// parsePagesTaken sums the /proc/vmstat counters of work that moves the RSS of a process that
// does not run: pgsteal_* (some kernels count a page under two of them, which changes nothing
// for a sum compared with its previous value), pswpout and thp_collapse_alloc. The file is one
// "name value" line per counter; a malformed line is an error.
func parsePagesTaken(b []byte) (uint64, error) {
	var sum uint64
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		name, p := kfile.Field(line, 0)
		if name == nil {
			continue
		}
		v, p := kfile.Field(line, p)
		if rest, _ := kfile.Field(line, p); v == nil || rest != nil {
			return 0, kfile.ParseError("/proc/vmstat", line, kfile.ErrSyntax)
		}
		n, err := kfile.ParseInt(v)
		if err != nil {
			return 0, kfile.ParseError("/proc/vmstat", line, err)
		}
		if bytes.HasPrefix(name, []byte("pgsteal_")) || string(name) == "pswpout" || string(name) == "thp_collapse_alloc" {
			sum += uint64(n)
		}
	}
	return sum, nil
}
