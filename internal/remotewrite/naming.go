package remotewrite

import (
	"sort"
	"strings"

	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/series"
)

// Named is one Prometheus series a Cantal series is sent as: its metric name, its other labels
// (Prometheus label names, without __name__) and a factor applied to every value (1 when the
// name's unit is the series').
type Named struct {
	Name   string
	Labels []Label
	Scale  float64
}

// Namer names a series as the agent's /metrics does: every Prometheus series it is exported as
// (promname.Mapper.MapAll: a container's cgroup series is also its cAdvisor family's), each
// sent with every point of the series. None: the series is not sent. A Namer is called from the
// sender goroutine only, once per series it sees (the result is kept).
type Namer func(l series.Labels, k series.Kind) []Named

// DefaultNamer is a generic naming for callers without internal/promname's (the agent passes
// promname's, so that a series has its /metrics names): the metric label made a Prometheus name,
// "_total" added to counters, every other label's name made a Prometheus label name.
func DefaultNamer(l series.Labels, k series.Kind) []Named {
	if k == series.State {
		return nil
	}
	name := promname.Name(l["metric"], true)
	if k == series.Counter && !strings.HasSuffix(name, "_total") {
		name += "_total"
		if strings.HasPrefix(name, "__") {
			name = "metric" + name
		}
	}
	out := make([]Label, 0, len(l))
	for n, v := range l {
		if n == "metric" {
			continue
		}
		out = append(out, Label{promname.Name(n, false), v})
	}
	return []Named{{Name: name, Labels: out, Scale: 1}}
}

// labelSet builds the label set sent for a series: __name__, the series' labels, then the
// external labels and the defaults where the series lacks them; empty values left out (for
// Prometheus an empty label is no label), the first of two equal names kept, sorted by name.
func labelSet(name string, own []Label, external, defaults []Label) []Label {
	out := make([]Label, 0, 1+len(own)+len(external)+len(defaults))
	out = append(out, Label{"__name__", name})
	seen := func(n string) bool {
		for _, l := range out {
			if l.Name == n {
				return true
			}
		}
		return false
	}
	for _, group := range [][]Label{own, external, defaults} {
		for _, l := range group {
			if l.Value == "" || l.Name == "" || seen(l.Name) {
				continue
			}
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
