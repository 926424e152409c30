package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// clkTck is USER_HZ, the unit of the CPU times in /proc/PID/stat; it is 100 on every Linux
// architecture Go supports.
const clkTck = 100

// procStat is the part of /proc/PID/stat the report uses.
type procStat struct {
	PID, PPID int
	// Ticks is utime+stime+cutime+cstime: the process's own CPU time and that of its children
	// it has reaped, so a tree's sum only grows when a child exits.
	Ticks    uint64
	RSSPages uint64
}

// parseStat parses the content of /proc/PID/stat. The command name may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	var s procStat
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open <= 0 || end < open {
		return s, errors.New("stat: no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, fmt.Errorf("stat: pid: %w", err)
	}
	s.PID = pid
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return s, fmt.Errorf("stat: %d fields after comm, want at least 22", len(f))
	}
	num := func(n int) (uint64, error) {
		v, err := strconv.ParseInt(string(f[n-3]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: field %d: %w", n, err)
		}
		if v < 0 {
			return 0, nil
		}
		return uint64(v), nil
	}
	ppid, err := num(4)
	if err != nil {
		return s, err
	}
	s.PPID = int(ppid)
	for _, n := range []int{14, 15, 16, 17} {
		v, err := num(n)
		if err != nil {
			return s, err
		}
		s.Ticks += v
	}
	if s.RSSPages, err = num(24); err != nil {
		return s, err
	}
	return s, nil
}

// treeUsage is one observation of a process tree.
type treeUsage struct {
	CPU   time.Duration // utime+stime(+reaped children) summed over the tree
	RSS   uint64        // bytes, summed over the tree (shared pages counted in each process)
	Procs int
}

// readTree sums the usage of root and all its descendants, found by walking /proc once.
func readTree(root int) (treeUsage, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return treeUsage{}, fmt.Errorf("read /proc: %w", err)
	}
	stats := map[int]procStat{}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		s, err := parseStat(b)
		if err != nil {
			continue
		}
		stats[pid] = s
		children[s.PPID] = append(children[s.PPID], pid)
	}
	if _, ok := stats[root]; !ok {
		return treeUsage{}, fmt.Errorf("process %d: not running", root)
	}
	page := uint64(os.Getpagesize())
	var u treeUsage
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		s := stats[p]
		u.CPU += time.Duration(s.Ticks) * time.Second / clkTck
		u.RSS += s.RSSPages * page
		u.Procs++
		stack = append(stack, children[p]...)
	}
	return u, nil
}

// fdCount is the number of open file descriptors of pid.
func fdCount(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("fds of %d: %w", pid, err)
	}
	return len(ents), nil
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return "?"
	}
	return string(bytes.Join(f[:3], []byte(" ")))
}

// sampler watches one process tree every period and keeps the peak RSS. Its methods are safe
// for concurrent use; Stop ends its goroutine.
type sampler struct {
	root int
	mu   sync.Mutex
	peak uint64
	last treeUsage
	stop chan struct{}
	done chan struct{}
}

func newSampler(root int, period time.Duration) *sampler {
	s := &sampler{root: root, stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	u, err := readTree(s.root)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = u
	if u.RSS > s.peak {
		s.peak = u.RSS
	}
}

// Now samples immediately and returns the observation.
func (s *sampler) Now() treeUsage {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// ResetPeak starts a new peak window.
func (s *sampler) ResetPeak() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peak = s.last.RSS
}

// Peak is the largest RSS seen since the start or the last ResetPeak.
func (s *sampler) Peak() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Stop ends the sampling goroutine; safe once.
func (s *sampler) Stop() {
	close(s.stop)
	<-s.done
}
