package procscan

import (
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
)

// ScanStats counts, since a Processes was made, the work its scans left out to keep their
// interval under heavy process churn (see Processes.SetBudget and docs/metrics.md):
//
//   - ShedDetails: reads of a process's details (status, io, cgroup, cmdline) not done because
//     the scan had used its budget; ShedScans: scans that shed any. An application's
//     (CANTAL_PATH) are never shed.
//   - SkippedBusy: processes whose environment was not read in their first scan because they
//     had forked and not yet exec'd (the read would be of the parent's, and would wait for an
//     exec under way); it is read at the next scan.
//   - DeferredDetails: processes whose details waited for their second scan (most
//     short-lived processes have none).
//   - StatReused: stat lines not read again because the process had not run since the
//     previous scan (see sleeping in idle.go); not work left out, work found unnecessary.
//   - TaskIter: the latest scan had every process's scheduler counters and uid from the BPF
//     task iterator (taskiter.go), not from files.
type ScanStats = apiwire.ProcessScan // as /api/v1/status writes it (process_scan)

// scanCount is what one scan left out; owned by Collect.
type scanCount struct {
	shed, busy, deferred, reused int64
}

// scanCounters are the totals behind ScanStats, read from any goroutine.
type scanCounters struct {
	scans, shedScans, shed, busy, deferred, reused atomic.Int64
	taskIter                                       atomic.Bool
	refs                                           [5]*series.Ref // owned by Collect
}

func (c *scanCounters) add(sc scanCount) {
	c.scans.Add(1)
	if sc.shed > 0 {
		c.shedScans.Add(1)
	}
	c.shed.Add(sc.shed)
	c.busy.Add(sc.busy)
	c.deferred.Add(sc.deferred)
	c.reused.Add(sc.reused)
}

// SetBudget sets how long a scan may spend before it sheds the details of processes that are
// not applications (see ScanStats), counted from the start of Collect; 0 (the default) means
// no limit. The agent sets about half its interval, so that a scan that falls behind under
// heavy churn still ends in time for the next. It must not be called concurrently with Collect.
func (p *Processes) SetBudget(d time.Duration) { p.budget = d }

// Stats returns what the scans left out so far. It is safe to call from any goroutine.
func (p *Processes) Stats() ScanStats {
	c := &p.stats
	return ScanStats{
		Scans: c.scans.Load(), ShedScans: c.shedScans.Load(), ShedDetails: c.shed.Load(),
		SkippedBusy: c.busy.Load(), DeferredDetails: c.deferred.Load(), StatReused: c.reused.Load(),
		TaskIter: c.taskIter.Load(),
	}
}

var scanStatSeries = [5]string{
	"process_scan.shed_scans", "process_scan.shed_details", "process_scan.skipped_busy", "process_scan.deferred_details",
	"process_scan.stat_reused",
}

// putStats puts the ScanStats counters as series.
func (p *Processes) putStats(sink series.Sink) {
	c := &p.stats
	vals := [5]int64{c.shedScans.Load(), c.shed.Load(), c.busy.Load(), c.deferred.Load(), c.reused.Load()}
	for i, v := range vals {
		if c.refs[i] == nil {
			c.refs[i] = sink.Series(series.Labels{"metric": scanStatSeries[i]}, series.Counter)
		}
		sink.Put(c.refs[i], uint64(v))
	}
}
