package main

import (
	"context"
	"fmt"
	"github.com/cantal-go/cantal/internal/apiwire"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// status is the agent's /api/v1/status answer, decoded with the type the agent encodes it from so the report
// follows the contract.
type status = apiwire.Status

// agentProc is a running cantal-agent.
type agentProc struct {
	*child
	url string
}

// startAgent starts bin listening on port with the given extra flags and waits for its first
// scan.
func startAgent(ctx context.Context, bin, dir string, port int, flags ...string) (*agentProc, error) {
	args := append([]string{bin, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn"}, flags...)
	c, err := spawn("cantal-agent", filepath.Join(dir, "agent.log"), nil, -1, -1, args...)
	if err != nil {
		return nil, err
	}
	a := &agentProc{child: c, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	err = waitFor(ctx, 60*time.Second, "agent's first scan", func() error {
		select {
		case <-c.done:
			return fmt.Errorf("agent exited: %v (see %s)", c.err, filepath.Join(dir, "agent.log"))
		default:
		}
		s, err := a.Status(ctx)
		if err != nil {
			return err
		}
		if s.LastScan.Scans < 1 {
			return errNotYet
		}
		return nil
	})
	if err != nil {
		c.Stop(5 * time.Second)
		return nil, err
	}
	return a, nil
}

// Status fetches /api/v1/status.
func (a *agentProc) Status(ctx context.Context) (status, error) {
	var s status
	err := getJSON(ctx, a.url+"/api/v1/status", &s)
	return s, err
}

// scanWatch polls the agent's status every 200 ms and records every scan it sees: the
// duration the agent reports and the time between consecutive scans' timestamps (only for
// scans seen one after the other, so a missed poll never inflates a period). Samples are
// live series × scans. Safe for concurrent use.
type scanWatch struct {
	mu        sync.Mutex
	durations []float64 // ms
	periods   []float64 // ms
	samples   float64
	scans     int64
	errors    int
	last      status
	have      bool
	stop      chan struct{}
	done      chan struct{}
}

func watchScans(ctx context.Context, a *agentProc) *scanWatch {
	w := &scanWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s, err := a.Status(ctx)
			w.mu.Lock()
			if err != nil {
				w.errors++
			} else {
				if w.have && s.LastScan.Scans > w.last.LastScan.Scans {
					n := s.LastScan.Scans - w.last.LastScan.Scans
					w.scans += n
					w.samples += float64(n) * float64(s.Counts.LiveSeries)
					w.durations = append(w.durations, s.LastScan.DurationMs)
					if n == 1 {
						w.periods = append(w.periods, float64(s.LastScan.TS-w.last.LastScan.TS))
					}
				}
				w.last, w.have = s, true
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// Stop ends the polling; safe once.
func (w *scanWatch) Stop() {
	close(w.stop)
	<-w.done
}

// scanStats is a summary of what a scanWatch saw.
type scanStats struct {
	Scans                  int64
	Samples                float64
	DurP50, DurP99, DurMax float64
	PeriodP50, PeriodP99   float64
	PeriodMin, PeriodMax   float64
	Periods, StatusErrors  int
	Last                   status
}

func (w *scanWatch) Stats() scanStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := append([]float64(nil), w.durations...)
	p := append([]float64(nil), w.periods...)
	sort.Float64s(d)
	sort.Float64s(p)
	st := scanStats{Scans: w.scans, Samples: w.samples, Periods: len(p), StatusErrors: w.errors, Last: w.last}
	st.DurP50, st.DurP99, st.DurMax = quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1)
	st.PeriodP50, st.PeriodP99, st.PeriodMax = quantile(p, 0.5), quantile(p, 0.99), quantile(p, 1)
	st.PeriodMin = quantile(p, 0)
	return st
}

// quantile of sorted xs by the nearest-rank method; 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(q*float64(len(xs))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(xs) {
		i = len(xs) - 1
	}
	return xs[i]
}
