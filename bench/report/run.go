package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is a process the report started, in its own process group so that the whole tree
// (netdata's plugins) is signalled together. The report owns it and must call Stop.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// spawn starts argv with its output appended to logPath; uid/gid ≥ 0 run it as that user.
func spawn(name, logPath string, env []string, uid, gid int, argv ...string) (*child, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if uid >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		lf.Close()
		close(c.done)
	}()
	return c, nil
}

// Pid is the process id of the child (the leader of its group).
func (c *child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig to the child alone.
func (c *child) Signal(sig syscall.Signal) { _ = c.cmd.Process.Signal(sig) }

// Wait waits up to d for the child to exit and reports whether it did.
func (c *child) Wait(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop sends SIGTERM to the whole group, then SIGKILL after grace. Safe more than once.
func (c *child) Stop(grace time.Duration) {
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if !c.Wait(grace) {
		slog.Warn("did not stop in time, killing", "name", c.name, "grace", grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		c.Wait(10 * time.Second)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // leftovers of the group
}

// getJSON decodes the JSON answer of url into v.
func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("get %s: %s: %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("get %s: decode: %w", url, err)
	}
	return nil
}

// waitFor polls f every 250 ms until it returns nil or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after %s: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var errNotYet = errors.New("not yet")
