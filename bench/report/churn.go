package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// churn keeps about Target short-lived processes alive: each is a `sleep` of a random lifetime
// in [Life/2, 3·Life/2]; every tenth names a CANTAL_PATH (from a pool of shm files with five
// counters each). It owns its processes and files; Stop kills and removes them.
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
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			p.Wait()
			c.mu.Lock()
			delete(c.alive, p.Pid)
			c.mu.Unlock()
		}()
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
	for _, p := range c.alive {
		_ = p.Kill()
	}
	c.mu.Unlock()
	c.wg.Wait()
	os.RemoveAll(c.dir)
}
