package notify

import (
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
)

// ResolvedRetention is how long a resolved alert is still sent (as resolved), as Prometheus's
// rules keep sending it, so an Alertmanager that missed the first resolution still gets it.
const ResolvedRetention = 15 * time.Minute

// Firing is one alert firing now, as a Tracker takes it.
type Firing struct {
	Labels      labels.Labels // identity: alertname and the rest
	Annotations labels.Labels
	FiredAt     time.Time // when it started firing
	// GeneratorURL is where the alert can be seen (the agent's alerts page).
	GeneratorURL string
}

// Tracker turns successive lists of firing alerts (the built-in engine's, after each scan) into
// notifications with the rules Prometheus's alerting rules follow (rules.AlertingRule):
//   - a firing alert is sent when it starts firing and again every ResendDelay, with EndsAt
//     4 × max(ResendDelay, Interval) ahead, so an Alertmanager resolves it by itself if the
//     agent stops sending (the agent died);
//   - an alert no longer in the list is resolved: sent at once with EndsAt = the time it was
//     resolved, and again every ResendDelay for ResolvedRetention;
//   - an alert that fires again after its resolution is a new alert (a new StartsAt).
//
// Forget drops alerts without resolving them (another member sends them now).
// A Tracker is used by one goroutine.
type Tracker struct {
	ResendDelay time.Duration // Prometheus's --rules.alert.resend-delay; 0: 1m
	Interval    time.Duration // how often Update is called; 0: ResendDelay
	active      map[string]*tracked
}

type tracked struct {
	f          Firing
	resolvedAt time.Time
	lastSent   time.Time
	validUntil time.Time
}

func (t *Tracker) delays() (resend, valid time.Duration) {
	resend = t.ResendDelay
	if resend <= 0 {
		resend = time.Minute
	}
	return resend, 4 * max(resend, t.Interval)
}

// Update takes the alerts firing at now and returns those to send now.
func (t *Tracker) Update(now time.Time, firing []Firing) []*notifier.Alert {
	if t.active == nil {
		t.active = map[string]*tracked{}
	}
	resend, valid := t.delays()
	seen := make(map[string]bool, len(firing))
	for _, f := range firing {
		k := f.Labels.String()
		seen[k] = true
		a := t.active[k]
		if a == nil || !a.resolvedAt.IsZero() {
			a = &tracked{}
			t.active[k] = a
		}
		a.f = f
	}
	var keys []string
	for k, a := range t.active {
		if !seen[k] && a.resolvedAt.IsZero() {
			a.resolvedAt = now
		}
		if !a.resolvedAt.IsZero() && now.Sub(a.resolvedAt) > ResolvedRetention {
			delete(t.active, k)
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []*notifier.Alert
	for _, k := range keys {
		a := t.active[k]
		needs := a.lastSent.IsZero() || a.resolvedAt.After(a.lastSent) || a.lastSent.Add(resend).Before(now)
		if !needs {
			continue
		}
		a.lastSent = now
		n := &notifier.Alert{Labels: a.f.Labels, Annotations: a.f.Annotations, StartsAt: a.f.FiredAt, GeneratorURL: a.f.GeneratorURL}
		if a.resolvedAt.IsZero() {
			a.validUntil = now.Add(valid)
			n.EndsAt = a.validUntil
		} else {
			n.EndsAt = a.resolvedAt
		}
		out = append(out, n)
	}
	return out
}

// Forget drops the alerts keep says no to, without sending their resolution: another sender
// now sends them (see Chosen).
func (t *Tracker) Forget(keep func(labels.Labels) bool) {
	for k, a := range t.active {
		if !keep(a.f.Labels) {
			delete(t.active, k)
		}
	}
}

// Active returns how many alerts the Tracker holds (firing, or resolved and still sent).
func (t *Tracker) Active() int { return len(t.active) }

// Chosen reports whether self is the member that sends the cluster's alerts: the lowest id among
// the alive members, self included (self is alive to itself). Every member that sees the same
// membership makes the same choice; when the chosen member dies, the next lowest takes over.
// An empty self (no cluster) is always chosen.
func Chosen(self string, alive []string) bool {
	if self == "" {
		return true
	}
	for _, id := range alive {
		if id != "" && id < self {
			return false
		}
	}
	return true
}
