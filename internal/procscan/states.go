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
}

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
// its <proc>/PID/task listed and the stat line of each thread but the main one read: the one
// walk this adds to the scan, only with Options.States. A thread that exits meanwhile is
// skipped, as node_exporter skips it.
func (p *Processes) collectStates(procfd int, table []Process, sink series.Sink) {
	s := &p.statesState
	if s.procRefs == nil {
		s.procRefs, s.threadRefs = map[byte]*stateRef{}, map[byte]*stateRef{}
		s.taskDents = make([]byte, 8<<10)
	}
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
			if err := p.threadStates(procfd, row.PID, s); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
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

// threadStates counts the states of pid's threads but its main one into s.threadN. A process
// or thread gone meanwhile is no error.
func (p *Processes) threadStates(procfd, pid int, s *statesState) error {
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
		s.threadN[c]++
	}
	return nil
}
