package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// churn keeps about Target short-lived processes alive: each is a `sleep` of a random lifetime
// in [Life/2, 3·Life/2] (the first Target ones what is left of such a lifetime, see
// residualLife), so Target/Life start every second; every tenth names a CANTAL_PATH (from a pool of shm files with five
// counters each). It owns its processes and files; Stop kills and removes them.
//
// It reaps with wait4(-1), so it must be the only thing in its process that starts children:
// the report runs it as its own process (`report churn`, see churnProc). A goroutine blocked in
// os.Process.Wait per child would hold one OS thread each, past Go's 10000-thread limit.
type churn struct {
	Target  int
	Life    time.Duration
	dir     string
	sleep   string
	started atomic.Int64
	failed  atomic.Int64
	mu      sync.Mutex
	alive   map[int]*os.Process
	cancel  context.CancelFunc
	done    chan struct{}
	wg      sync.WaitGroup
}

const churnPool = 100

func startChurn(ctx context.Context, target int, life time.Duration, dir string) (*churn, error) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return nil, fmt.Errorf("churn: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("churn: %w", err)
	}
	meta := ""
	for i := 0; i < 5; i++ {
		meta += fmt.Sprintf("counter 8: {\"metric\": \"churn.counter.%d\"}\n", i)
	}
	for i := 0; i < churnPool; i++ {
		base := filepath.Join(dir, fmt.Sprintf("c%d", i))
		if err := os.WriteFile(base+".values", make([]byte, 40), 0o644); err != nil {
			return nil, fmt.Errorf("churn: %w", err)
		}
		if err := os.WriteFile(base+".meta", []byte(meta), 0o644); err != nil {
			return nil, fmt.Errorf("churn: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &churn{Target: target, Life: life, dir: dir, sleep: sleep, alive: map[int]*os.Process{}, cancel: cancel, done: make(chan struct{})}
	c.wg.Add(1)
	go c.reap()
	go c.loop(ctx)
	return c, nil
}

func (c *churn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.alive)
}

func (c *churn) loop(ctx context.Context) {
	defer close(c.done)
	env := os.Environ()
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return
		}
		if c.count() >= c.Target {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		life := c.Life/2 + time.Duration(rand.Int64N(int64(c.Life)+1))
		if i < c.Target {
			life = residualLife(c.Life)
		}
		e := env
		if i%10 == 0 {
			e = append(env[:len(env):len(env)], "CANTAL_PATH="+filepath.Join(c.dir, fmt.Sprintf("c%d", i/10%churnPool)))
		}
		p, err := os.StartProcess(c.sleep, []string{"sleep", strconv.FormatFloat(life.Seconds(), 'f', 2, 64)},
			&os.ProcAttr{Env: e, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}})
		if err != nil {
			c.failed.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		c.started.Add(1)
		c.mu.Lock()
		c.alive[p.Pid] = p
		c.mu.Unlock()
		p.Release()
	}
}

// residualLife is the time a process of the steady state has left to live, for the first
// Target processes: the generator starts them all at once, and with full lifetimes they would
// die together and the start rate would swing for a few lifetimes. In the steady state the
// time left of a live process with a lifetime uniform in [L/2, 3L/2] is uniform in [0, L/2]
// with probability 1/2, and otherwise falls linearly from L/2 to 3L/2.
func residualLife(l time.Duration) time.Duration {
	if rand.IntN(2) == 0 {
		return time.Duration(rand.Int64N(int64(l/2) + 1))
	}
	return l/2 + time.Duration(float64(l)*(1-math.Sqrt(rand.Float64())))
}

// reap collects exited children until the generator stops and every child is gone.
func (c *churn) reap() {
	defer c.wg.Done()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: none left
			select {
			case <-c.done:
				return
			case <-time.After(50 * time.Millisecond):
				continue
			}
		}
		c.mu.Lock()
		delete(c.alive, pid)
		c.mu.Unlock()
	}
}

// WaitFull waits until Target processes are alive or d passes.
func (c *churn) WaitFull(ctx context.Context, d time.Duration) {
	_ = waitFor(ctx, d, "churn population", func() error {
		if c.count() < c.Target*9/10 {
			return errNotYet
		}
		return nil
	})
}

// Started is the number of processes started so far.
func (c *churn) Started() int64 { return c.started.Load() }

// Stop ends the generator, kills its live processes, reaps them and removes its files.
func (c *churn) Stop() {
	c.cancel()
	<-c.done
	c.mu.Lock()
	for pid := range c.alive {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	c.mu.Unlock()
	c.wg.Wait()
	os.RemoveAll(c.dir)
}

// runChurnCmd is `report churn`: a churn generator in its own process, until SIGTERM. It prints
// "churn: N started, M alive" every second so that its parent can follow it.
func runChurnCmd(ctx context.Context, n int, life time.Duration, dir string) error {
	c, err := startChurn(ctx, n, life, dir)
	if err != nil {
		return err
	}
	defer c.Stop()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fmt.Printf("churn: %d started, %d alive\n", c.Started(), c.count())
		}
	}
}

// churnProc is a `report churn` child process and what it last reported.
type churnProc struct {
	*child
	log    string
	Target int
	Life   time.Duration
}

// spawnChurn starts `report churn` (this executable) with its output in dir/churn-N.out.
func spawnChurn(ctx context.Context, dir string, n int, life time.Duration) (*churnProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("churn: %w", err)
	}
	log := filepath.Join(dir, fmt.Sprintf("churn-%d.out", n))
	shm := fmt.Sprintf("/dev/shm/cantal-report-churn-%d-%d", os.Getpid(), n)
	c, err := spawn("churn", log, nil, -1, -1, self, "churn", "-churn", strconv.Itoa(n), "-churn-life", life.String(), "-dir", shm)
	if err != nil {
		return nil, err
	}
	return &churnProc{child: c, log: log, Target: n, Life: life}, nil
}

// Counts is the last "started, alive" line the generator printed.
func (p *churnProc) Counts() (started, alive int64) {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if _, err := fmt.Sscanf(lines[i], "churn: %d started, %d alive", &started, &alive); err == nil {
			return started, alive
		}
	}
	return 0, 0
}

// WaitFull waits until 90% of Target processes are alive or d passes.
func (p *churnProc) WaitFull(ctx context.Context, d time.Duration) {
	_ = waitFor(ctx, d, "churn population", func() error {
		if _, alive := p.Counts(); alive < int64(p.Target)*9/10 {
			return errNotYet
		}
		return nil
	})
}
