package notify

import (
	"fmt"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkBuiltinTrackerScan is the notifier goroutine's work after one scan with 1000 firing
// built-in alerts (1000 filesystems full), in the steady state where none is due for resending:
// what each scan costs the agent beside the scan (never in it).
func BenchmarkBuiltinTrackerScan(b *testing.B) {
	snap := &alerts.Snapshot{}
	for i := range 1000 {
		snap.Alerts = append(snap.Alerts, alerts.Alert{Name: alerts.RuleFilesystem, State: "firing", Severity: "critical",
			Labels: series.Labels{"mountpoint": fmt.Sprintf("/m%d", i), "device": "/dev/x", "fstype": "xfs"}, Value: 2, Op: "<", Threshold: 10, SinceMs: 1000})
	}
	o := BuiltinOptions{Node: "n", Instance: "n:22682", Chosen: true}
	tr := &Tracker{ResendDelay: time.Minute, Interval: 2 * time.Second}
	now := time.Unix(1_000_000, 0)
	tr.Update(now, BuiltinFiring(snap, o))
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond) // never a resend delay later
		if out := tr.Update(now, BuiltinFiring(snap, o)); len(out) != 0 {
			b.Fatalf("%d resent", len(out))
		}
	}
}
