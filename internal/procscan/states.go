package procscan

// node_exporter's processes collector, from the process scan (Options.States).

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// statesState is what Processes keeps for the processes' and threads' state counts between
// scans: the series of each state letter seen, and reused buffers. Only Collect uses it.
type statesState struct {
	procRefs   map[byte]*stateRef // processes.state{state}
	threadRefs map[byte]*stateRef // processes.threads_state{thread_state}
	pidsRef    *series.Ref
	threadsRef *series.Ref
	maxRefs    [2]*series.Ref // processes.max_processes, processes.max_threads
	procN      [256]int
	threadN    [256]int
	tids       []int
	taskDents  []byte
	// The states of the threads but the main one of each multi-threaded process, from the
	// latest walk of its task directory (every threadsEvery scans), by pid.
	others map[int]*otherThreads
	walks  uint64 // scans with States so far
}

type otherThreads struct {
	start         uint64 // the process's start time, to tell a reused pid
	states        []byte
	scanmark.Mark // the latest scan that had the process
}

// threadsEvery is how often (in scans) the task directories of multi-threaded processes are
// walked for their threads' states; the scans between count each such process's other threads
// as the latest walk found them. A walk reads one stat file per thread (~10 µs each with its
// open and close: 3 ms a scan for 300 threads on a 2-core VM), which the main threads, read by
// the scan anyway, do not need. A process new since the last walk is walked at once.
const threadsEvery = 5

type stateRef struct {
	ref           *series.Ref
	scanmark.Mark // the latest scan that saw the state
}

// limitFiles are the limits node_exporter's processes collector reads, with their series.
var limitFiles = [2]struct{ path, metric string }{
	{"sys/kernel/pid_max\x00", "processes.max_processes"},
	{"sys/kernel/threads-max\x00", "processes.max_threads"},
}

// parseStatState returns the state letter of a /proc/PID/stat or /proc/PID/task/TID/stat
// line: the first field after the command, which is in parentheses and may hold anything
// but ends at the line's last ')'.
func parseStatState(b []byte) (byte, error) {
	cl := bytes.LastIndexByte(b, ')')
	if cl < 0 || kfile.IndexByte(b[:cl], '(') < 0 || cl+2 >= len(b) || b[cl+1] != ' ' {
		return 0, kfile.ParseError("/proc/PID/task/TID/stat", b, kfile.ErrSyntax)
	}
	c := b[cl+2]
	if c < 'A' || c > 'z' || (c > 'Z' && c < 'a') || (cl+3 < len(b) && b[cl+3] != ' ' && b[cl+3] != '\n') {
		return 0, kfile.ParseError("/proc/PID/task/TID/stat", b, kfile.ErrSyntax)
	}
	return c, nil
}

// collectStates puts node_exporter's processes collector's series from this scan's process
// table: processes.pids (the processes read), processes.threads (their threads, from each
// stat line), processes.state{state} per state letter, processes.threads_state{thread_state}
// per state letter of every thread, and the limits processes.max_processes
// (<proc>/sys/kernel/pid_max) and processes.max_threads (threads-max). A state no process or
// thread is in has no series, as on node_exporter.
//
// A single-threaded process's thread is the process: its state is the stat line's (which the
// scan reuses while the process does not run, see idle.go). A process with more threads has
// its <proc>/PID/task listed and the stat line of each thread but the main one read, every
// threadsEvery scans and at its first scan (the scans between count its other threads as then):
// the one walk this adds to the scan, only with Options.States. A thread that exits meanwhile
// is skipped, as node_exporter skips it.
func (p *Processes) collectStates(procfd int, table []Process, sink series.Sink) {
	s := &p.statesState
	if s.procRefs == nil {
		s.procRefs, s.threadRefs = map[byte]*stateRef{}, map[byte]*stateRef{}
		s.taskDents = make([]byte, 8<<10)
		s.others = map[int]*otherThreads{}
	}
	walk := s.walks%threadsEvery == 0
	s.walks++
	clear(s.procN[:])
	clear(s.threadN[:])
	var threads int
	var firstErr error
	for i := range table {
		row := &table[i]
		st := byte('?')
		if row.State != "" {
			st = row.State[0]
		}
		s.procN[st]++
		threads += row.Threads
		s.threadN[st]++ // the main thread: the process's own line, as node_exporter counts it
		if row.Threads > 1 {
			o := s.others[row.PID]
			if o == nil || o.start != uint64(row.StartTime) {
				o = &otherThreads{start: uint64(row.StartTime)}
				s.others[row.PID] = o
			} else if !walk {
				o.See(p.gen)
				for _, c := range o.states {
					s.threadN[c]++
				}
				continue
			}
			o.See(p.gen)
			o.states = o.states[:0]
			if err := p.threadStates(procfd, row.PID, o); err != nil && firstErr == nil {
				firstErr = err
			}
			for _, c := range o.states {
				s.threadN[c]++
			}
		}
	}
	scanmark.Sweep(s.others, p.gen, nil)
	if firstErr != nil {
		sink.Problem(p.opt.Proc+"/PID/task", firstErr.Error())
	}
	put := func(r **series.Ref, metric string, v int) {
		if *r == nil {
			*r = sink.Series(series.Labels{"metric": metric}, series.Level)
		}
		sink.Put(*r, uint64(v))
	}
	put(&s.pidsRef, "processes.pids", len(table))
	put(&s.threadsRef, "processes.threads", threads)
	putStates(sink, s.procRefs, &s.procN, "processes.state", "state", p.gen)
	putStates(sink, s.threadRefs, &s.threadN, "processes.threads_state", "thread_state", p.gen)
	for i, f := range limitFiles {
		b, err := kfile.ReadSingleAt(procfd, []byte(f.path), &p.buf, 64)
		var v uint64
		if err == nil {
			v, err = kfile.ParseUint(bytes.TrimSpace(b))
		}
		if err != nil {
			sink.Problem(p.opt.Proc+"/"+f.path[:len(f.path)-1], err.Error())
			continue
		}
		if s.maxRefs[i] == nil {
			s.maxRefs[i] = sink.Series(series.Labels{"metric": f.metric}, series.Level)
		}
		sink.Put(s.maxRefs[i], v)
	}
}

func putStates(sink series.Sink, refs map[byte]*stateRef, n *[256]int, metric, label string, gen uint64) {
	for c, v := range n {
		if v == 0 {
			continue
		}
		r := refs[byte(c)]
		if r == nil {
			r = &stateRef{ref: sink.Series(series.Labels{"metric": metric, label: stateString(byte(c))}, series.Level)}
			refs[byte(c)] = r
		}
		r.See(gen)
		sink.Put(r.ref, uint64(v))
	}
	scanmark.Sweep(refs, gen, nil)
}

// threadStates appends the states of pid's threads but its main one to o.states. A process or
// thread gone meanwhile is no error.
func (p *Processes) threadStates(procfd, pid int, o *otherThreads) error {
	s := &p.statesState
	dir := strconv.AppendInt(p.path[:0], int64(pid), 10)
	dir = append(dir, "/task\x00"...)
	p.path = dir
	fd, err := kfile.OpenAt(procfd, dir)
	if err != nil {
		if isGone(err) {
			return nil
		}
		return fmt.Errorf("open %s/%d/task: %w", p.opt.Proc, pid, err)
	}
	s.tids, err = kfile.PIDDirs(fd, s.taskDents, s.tids[:0])
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("%s/%d/task: %w", p.opt.Proc, pid, err)
	}
	for _, tid := range s.tids {
		if tid == pid {
			continue
		}
		b := strconv.AppendInt(p.path[:0], int64(pid), 10)
		b = append(b, "/task/"...)
		b = strconv.AppendInt(b, int64(tid), 10)
		p.path = append(b, "/stat\x00"...)
		line, err := kfile.ReadSingleAt(procfd, p.path, &p.buf, 4096)
		if err != nil {
			if isGone(err) || errors.Is(err, unix.ESRCH) {
				continue
			}
			return fmt.Errorf("read %s/%d/task/%d/stat: %w", p.opt.Proc, pid, tid, err)
		}
		if len(line) == 0 {
			continue // exiting
		}
		c, err := parseStatState(line)
		if err != nil {
			return err
		}
		o.states = append(o.states, c)
	}
	return nil
}
