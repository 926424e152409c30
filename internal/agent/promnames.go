package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/textfile"
)

// promOptions are the options of the promname.Mappers of /metrics and remote write: the types
// of the textfile collector's families, as their files declare them.
func (a *Agent) promOptions() promname.Options {
	var o promname.Options
	if tf := a.textfile; tf != nil {
		o.TextfileType = func(name string) (promname.Type, bool) {
			t, ok := tf.Type(name)
			switch {
			case !ok:
				return 0, false
			case t == textfile.Counter:
				return promname.Counter, true
			case t == textfile.Gauge:
				return promname.Gauge, true
			}
			return promname.Untyped, true
		}
	}
	return o
}

// selfMetrics returns the gatherer of the agent's own process_* families on /metrics
// (process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, process_max_fds,
// process_virtual_memory_bytes, process_start_time_seconds, ...), as every Prometheus exporter
// has them: client_golang's process collector, read from the real /proc/self whatever --proc
// says; and more of the agent's own (the reloads' outcome, reload.go; the Alertmanager
// notifier's cantal_notifications_* from gs, package notify).
func selfMetrics(gs []prometheus.Gatherer, more ...prometheus.Collector) func() []*dto.MetricFamily {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(more...)
	all := append(prometheus.Gatherers{reg}, gs...)
	return func() []*dto.MetricFamily {
		mfs, _ := all.Gather() // what could be read: a family it failed to read is left out
		return mfs
	}
}
