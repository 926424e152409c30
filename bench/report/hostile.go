package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// hostile is a set of unprivileged processes whose CANTAL_PATH names files the agent must
// refuse or survive: a FIFO, a 1 GiB sparse values file, root-owned 0600 files, and a meta
// rewritten in place every millisecond. It owns its processes and files; Stop removes them.
type hostile struct {
	dir      string
	procs    []*exec.Cmd
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	rewrites int
}

const goodMeta = "counter 8: {\"metric\": \"hostile.a\"}\nlevel 8 signed: {\"metric\": \"hostile.b\"}\n"

func startHostile(ctx context.Context, dir string) (*hostile, error) {
	uid, gid, err := lookupUser("nobody")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &hostile{dir: dir, cancel: cancel}
	mk := func(name string, mode os.FileMode, size int64, content string, owner int) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
		if size > 0 {
			if err := os.Truncate(p, size); err != nil {
				return err
			}
		}
		if owner >= 0 {
			return os.Chown(p, owner, gid)
		}
		return nil
	}
	steps := []error{
		syscall.Mkfifo(filepath.Join(dir, "fifo.meta"), 0o644),
		syscall.Mkfifo(filepath.Join(dir, "fifo.values"), 0o644),
		mk("sparse.meta", 0o644, 0, goodMeta, uid),
		mk("sparse.values", 0o644, 1<<30, "", uid),
		mk("rootonly.meta", 0o600, 0, goodMeta, -1),
		mk("rootonly.values", 0o600, 16, "", -1),
		mk("flappy.meta", 0o644, 0, goodMeta, uid),
		mk("flappy.values", 0o644, 16, "", uid),
	}
	for _, err := range steps {
		if err != nil {
			h.Stop()
			return nil, fmt.Errorf("hostile files: %w", err)
		}
	}
	os.Chown(filepath.Join(dir, "fifo.meta"), uid, gid)
	os.Chown(filepath.Join(dir, "fifo.values"), uid, gid)
	for _, name := range []string{"fifo", "sparse", "rootonly", "flappy"} {
		cmd := exec.Command("sleep", "infinity")
		cmd.Env = append(os.Environ(), "CANTAL_PATH="+filepath.Join(dir, name), "CANTAL_APPNAME=hostile-"+name)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			h.Stop()
			return nil, fmt.Errorf("hostile process %s: %w", name, err)
		}
		h.procs = append(h.procs, cmd)
	}
	// The meta rewritten in place every millisecond, alternating between two and three metrics
	// (the values file stays 16 bytes, so the three-metric version is also too short for it).
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		p := filepath.Join(dir, "flappy.meta")
		alt := goodMeta + "counter 8: {\"metric\": \"hostile.c\"}\n"
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			m := goodMeta
			if i%2 == 1 {
				m = alt
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				continue
			}
			f.WriteString(m)
			f.Close()
			h.rewrites++
		}
	}()
	return h, nil
}

// Stop kills the processes and removes the files; safe once.
func (h *hostile) Stop() {
	h.cancel()
	h.wg.Wait()
	for _, c := range h.procs {
		c.Process.Kill()
		c.Wait()
	}
	os.RemoveAll(h.dir)
}
