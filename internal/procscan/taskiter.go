package procscan

import (
	"fmt"
	"os"
	"slices"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/taskiter"
)

// The scheduler counters that tell whether a process ran since the previous scan (see
// sleeping) come, when the kernel allows, from one pass of a BPF task iterator at the start of
// the scan (package taskiter: ~0.7 µs a process here against ~3 µs for a pread of its kept
// schedstat file, and no file kept open), else from each process's /proc/PID/schedstat.

// openTasks tries, once, to load the task iterator. It is used only on the real /proc, and
// only when its record of this process matches <proc>/self/stat (the agent is in the initial
// pid namespace, where the iterator's pids are those of /proc).
func (p *Processes) openTasks(procfd int, sink series.Sink) {
	p.tasksTried = true
	if p.opt.Proc != "/proc" || p.opt.NoTaskIter {
		return
	}
	it, err := taskiter.Open()
	if err != nil {
		sink.Problem("task iterator", err.Error()+": reading each process's schedstat instead")
		return
	}
	tasks, err := it.Read(nil)
	if err == nil {
		err = p.checkTasks(procfd, tasks)
	}
	if err != nil {
		it.Close()
		p.tasks = nil
		sink.Problem("task iterator", err.Error()+": reading each process's schedstat instead")
		return
	}
	p.taskIter, p.tasks = it, tasks[:0]
}

// checkTasks verifies that tasks has this process, with the start time of <proc>/self/stat. It
// sets p.tasks to tasks.
func (p *Processes) checkTasks(procfd int, tasks []taskiter.Task) error {
	b, err := kfile.ReadFileAt(procfd, []byte("self/stat\x00"), &p.buf, 4096)
	if err != nil {
		return fmt.Errorf("task iterator: check: %w", err)
	}
	ps, err := parsePIDStat(b)
	if err != nil {
		return fmt.Errorf("task iterator: check: %w", err)
	}
	p.tasks = tasks
	if p.taskRec(os.Getpid(), ps.StartTicks) == nil {
		return fmt.Errorf("task iterator: its pids are not those of %s (another pid namespace?)", p.opt.Proc)
	}
	return nil
}

// startTicks converts a task's start time to stat's clock ticks, as the kernel does.
func (p *Processes) startTicks(ns uint64) uint64 {
	return ns / (1_000_000_000 / uint64(p.opt.ClockTick))
}

// readTasks runs the task iterator for this scan; on failure the scan and those after read
// schedstat files.
func (p *Processes) readTasks(sink series.Sink) {
	var err error
	if p.tasks, err = p.taskIter.Read(p.tasks[:0]); err != nil {
		sink.Problem("task iterator", err.Error()+": reading each process's schedstat instead")
		p.closeTasks()
	}
}

// taskRec returns this scan's record of the process pid that started at startTicks, or nil.
// The scan reads the pids in the pass's order, so the record at taskAt is looked at first.
func (p *Processes) taskRec(pid int, startTicks uint64) *taskiter.Task {
	i := p.taskAt
	if i < 0 || i >= len(p.tasks) || p.tasks[i].PID != pid {
		var found bool
		if i, found = slices.BinarySearchFunc(p.tasks, pid, func(t taskiter.Task, pid int) int { return t.PID - pid }); !found {
			return nil
		}
	}
	if t := &p.tasks[i]; p.startTicks(t.StartNs) == startTicks {
		return t
	}
	return nil
}

// inPass reports whether this scan's pass of the task iterator has a record of pid.
func (p *Processes) inPass(pid int) bool {
	_, found := slices.BinarySearchFunc(p.tasks, pid, func(t taskiter.Task, pid int) int { return t.PID - pid })
	return found
}

func (p *Processes) closeTasks() {
	if p.taskIter != nil {
		p.taskIter.Close()
		p.taskIter, p.tasks = nil, nil
	}
}
