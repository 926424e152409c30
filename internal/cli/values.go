package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/shm"
)

// maxEnviron bounds how much of /proc/PID/environ is read.
const maxEnviron = 1 << 20

// values prints the metrics an application publishes, read from its files.
func (c *CLI) values(ctx context.Context, o options) error {
	base, extra, err := c.valuesBase(o)
	if err != nil {
		return err
	}
	r := shm.NewReader(base, shm.ReaderOptions{})
	defer r.Close()
	var snap shm.Snapshot
	// The application may be between its two renames (values, then meta): retry briefly.
	for attempt := 0; ; attempt++ {
		snap, err = r.Read()
		if !errors.Is(err, shm.ErrNotReady) || attempt == 20 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("read metrics at %s: %w", base, err)
	}
	for _, s := range snap.Layout.Skipped {
		fmt.Fprintf(c.Stderr, "cantal: skipped %s\n", clean(s))
	}
	b := c.valuesJSON(snap, extra)
	if o.output == "json" {
		_, err := c.Stdout.Write(b)
		return err
	}
	var ans apiwire.MetricsAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		return fmt.Errorf("values: %w", err) // our own JSON: cannot happen
	}
	return c.seriesTable(ans.Series, base)
}

// valuesJSON renders a snapshot as the agent's metrics answer, {"series": [...]}.
func (c *CLI) valuesJSON(snap shm.Snapshot, extra map[string]string) []byte {
	now := c.now().UnixMilli()
	b := []byte(`{"series":[`)
	for i := range snap.Layout.Entries {
		e := &snap.Layout.Entries[i]
		labels := make(series.Labels, len(e.Labels)+len(extra))
		for k, v := range e.Labels {
			labels[k] = v
		}
		for k, v := range extra {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
		s := series.Sample{Labels: labels, Kind: series.Kind(e.Kind), TS: now}
		if s.Kind == series.State {
			since, text := e.State(snap.Values)
			s.Since, s.Text = since, string(text)
		} else {
			s.Bits = e.Bits(snap.Values)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = s.AppendJSON(b)
	}
	return append(b, "]}\n"...)
}

// valuesBase finds the CANTAL_PATH base to read, and the labels that identify the process.
func (c *CLI) valuesBase(o options) (string, map[string]string, error) {
	arg := ""
	if len(o.args) > 0 {
		arg = o.args[0]
	}
	switch {
	case arg == "":
		p := c.getenv("CANTAL_PATH")
		if p == "" {
			return "", nil, usagef("values: give a PID or a CANTAL_PATH, or set CANTAL_PATH")
		}
		return p, nil, nil
	case isDigits(arg):
		return c.processBase(arg)
	}
	for _, ext := range []string{".meta", ".values"} {
		if b, ok := strings.CutSuffix(arg, ext); ok {
			return b, nil, nil
		}
	}
	return arg, nil, nil
}

// processBase reads CANTAL_PATH (and CANTAL_APPNAME) from a process's environment and resolves
// it inside the process's mount namespace through /proc/PID/root.
func (c *CLI) processBase(pid string) (string, map[string]string, error) {
	proc := c.Proc
	if proc == "" {
		proc = "/proc"
	}
	dir := filepath.Join(proc, pid)
	env, err := readCapped(filepath.Join(dir, "environ"), maxEnviron)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil, fmt.Errorf("no process %s", pid)
		}
		if errors.Is(err, os.ErrPermission) {
			return "", nil, fmt.Errorf("read environment of process %s (run as its user or root): %w", pid, err)
		}
		return "", nil, fmt.Errorf("read environment of process %s: %w", pid, err)
	}
	var path, app string
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("CANTAL_PATH=")); ok {
			path = string(v)
		} else if v, ok := bytes.CutPrefix(kv, []byte("CANTAL_APPNAME=")); ok {
			app = string(v)
		}
	}
	if path == "" {
		return "", nil, fmt.Errorf("process %s has no CANTAL_PATH in its environment: it publishes no metrics", pid)
	}
	extra := map[string]string{"pid": pid}
	if comm, err := readCapped(filepath.Join(dir, "comm"), 64); err == nil {
		extra["process"] = strings.TrimSuffix(string(comm), "\n")
	}
	if app != "" {
		extra["appname"] = app
	}
	if filepath.IsAbs(path) {
		return filepath.Join(dir, "root", path), extra, nil
	}
	return filepath.Join(dir, "cwd", path), extra, nil
}

// readCapped reads at most limit bytes of a file.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
