package notify

import (
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/series"
)

// TestBuiltinFiringLabels: a node's own alert carries node and instance; node_down carries the
// peer only (not the sender, status or address, which would make each sender's alert another
// alert at the Alertmanager), says the seconds since the peer was seen, and is left out unless
// this node is the chosen sender; pending alerts are not sent.
func TestBuiltinFiringLabels(t *testing.T) {
	snap := &alerts.Snapshot{Alerts: []alerts.Alert{
		{Name: alerts.RuleFilesystem, State: "firing", Severity: "critical", Labels: series.Labels{"mountpoint": "/data", "fs.type": "xfs"},
			Value: 2, Op: "<", Threshold: 10, SinceMs: 5000, Summary: "fs"},
		{Name: alerts.RuleNodeDown, State: "firing", Severity: "critical", Labels: series.Labels{"peer": "c", "addr": "10.0.0.3:22682", "status": "dead"},
			Value: 25, Op: ">=", Threshold: 10, SinceMs: 6000},
		{Name: alerts.RuleCPU, State: "pending", Severity: "warning", Labels: series.Labels{}},
	}}
	o := BuiltinOptions{Node: "a", Instance: "a:22682", Chosen: true}
	fs := BuiltinFiring(snap, o)
	if len(fs) != 2 {
		t.Fatalf("%d firing; want 2 (the pending one left out): %v", len(fs), fs)
	}
	fsys, down := fs[0], fs[1]
	if got := fsys.Labels.String(); got != `{alertname="filesystem_full", fs_type="xfs", instance="a:22682", mountpoint="/data", node="a", severity="critical"}` {
		t.Errorf("filesystem_full labels %s", got)
	}
	if fsys.Annotations.Get("description") != "2 < 10" || fsys.FiredAt.UnixMilli() != 5000 {
		t.Errorf("filesystem_full annotations %s, fired %v", fsys.Annotations, fsys.FiredAt)
	}
	if got := down.Labels.String(); got != `{alertname="node_down", peer="c", severity="critical"}` {
		t.Errorf("node_down labels %s; want alertname, peer, severity only", got)
	}
	if down.Annotations.Get("value") != "25" || down.Annotations.Get("reported_by") != "a" || down.Annotations.Get("status") != "dead" ||
		down.Annotations.Get("description") != "node c not seen for 25 s (dead in the membership)" {
		t.Errorf("node_down annotations %s", down.Annotations)
	}
	// Another sender's node_down is the same alert.
	o2 := o
	o2.Node = "b"
	if other := BuiltinFiring(snap, o2)[1]; other.Labels.String() != down.Labels.String() {
		t.Errorf("node_down from b %s, from a %s: want the same labels", other.Labels, down.Labels)
	}
	o.Chosen = false
	if fs := BuiltinFiring(snap, o); len(fs) != 1 || IsCluster(fs[0].Labels) {
		t.Errorf("not chosen: %v; want only the node's own alert", fs)
	}
}

func TestLabelName(t *testing.T) {
	for in, want := range map[string]string{"metric": "metric", "fs.type": "fs_type", ":metric": "_metric", "1x": "_x", "__name__": "", "é": "", "": ""} {
		if got := LabelName(in); got != want {
			t.Errorf("LabelName(%q) = %q; want %q", in, got, want)
		}
	}
}

// FuzzLabelName: whatever a series' label is called (pushed series name their own), the name
// sent is a label name every Alertmanager takes, or none.
func FuzzLabelName(f *testing.F) {
	for _, s := range []string{"metric", "fs.type", ":metric", "1x", "__name__", "é", "", "_", "a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n := LabelName(in)
		if n == "" {
			return
		}
		if !model.LabelName(n).IsValidLegacy() || strings.HasPrefix(n, "__") || len(n) != len(in) {
			t.Fatalf("LabelName(%q) = %q", in, n)
		}
	})
}
