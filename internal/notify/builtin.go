package notify

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/cantal-go/cantal/internal/alerts"
)

// BuiltinOptions say how the built-in engine's alerts are labelled.
type BuiltinOptions struct {
	Node     string // the node's name: the node label of its own alerts, reported_by of cluster ones
	Instance string // node:port, the instance label of its own alerts
	// Chosen: this node sends the cluster's alerts (see Chosen); false leaves them out.
	Chosen       bool
	GeneratorURL string // the agent's alerts page
}

// IsCluster reports whether an alert is about the cluster rather than the node that raised it
// (node_down): every member raises it, one sends it, and its labels name no sender, so the
// alert is the same at the Alertmanager whichever member sends it.
func IsCluster(ls labels.Labels) bool { return ls.Get(labels.AlertName) == alerts.RuleNodeDown }

// BuiltinFiring returns the firing alerts of a built-in engine snapshot as a Tracker takes them
// (pending alerts are not sent, as Prometheus does not send them):
//   - labels: alertname, severity, and the series' labels (names made Prometheus label names);
//     a node's own alert has node and instance too; a cluster alert (node_down) has peer only,
//     not the sender, nor the peer's status or address, which change while it fires;
//   - annotations: summary, value, a description "value op threshold", and for a cluster alert
//     the peer's status and address and reported_by (the sender).
func BuiltinFiring(snap *alerts.Snapshot, o BuiltinOptions) []Firing {
	if snap == nil {
		return nil
	}
	var out []Firing
	for _, a := range snap.Alerts {
		if a.State != "firing" {
			continue
		}
		cluster := a.Name == alerts.RuleNodeDown
		if cluster && !o.Chosen {
			continue
		}
		lb := labels.NewBuilder(labels.EmptyLabels())
		ab := labels.NewBuilder(labels.EmptyLabels())
		value := strconv.FormatFloat(a.Value, 'g', 6, 64)
		ab.Set("summary", a.Summary)
		ab.Set("value", value)
		if cluster {
			peer := a.Labels["peer"]
			lb.Set("peer", peer)
			ab.Set("status", a.Labels["status"])
			ab.Set("addr", a.Labels["addr"])
			ab.Set("reported_by", o.Node)
			ab.Set("description", "node "+peer+" not seen for "+value+" s ("+a.Labels["status"]+" in the membership)")
		} else {
			for k, v := range a.Labels {
				if n := LabelName(k); n != "" {
					lb.Set(n, v)
				}
			}
			lb.Set("node", o.Node)
			if o.Instance != "" {
				lb.Set("instance", o.Instance)
			}
			ab.Set("description", value+" "+a.Op+" "+strconv.FormatFloat(a.Threshold, 'g', 6, 64))
		}
		lb.Set(labels.AlertName, a.Name)
		lb.Set("severity", a.Severity)
		out = append(out, Firing{Labels: lb.Labels(), Annotations: ab.Labels(),
			FiredAt: time.UnixMilli(a.SinceMs), GeneratorURL: o.GeneratorURL})
	}
	return out
}

// LabelName returns a Cantal label's name as a Prometheus label name that any Alertmanager
// takes ([a-zA-Z_][a-zA-Z0-9_]*: other characters become _), or "" for one that cannot be (empty,
// or reserved: starting with __).
func LabelName(k string) string {
	b := []byte(k)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if n := string(b); n != "" && !strings.HasPrefix(n, "__") {
		return n
	}
	return ""
}
