package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/export"
	"github.com/cantal-go/cantal/internal/ingest"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// samples returns the latest value of every live series: the source of the Prometheus, Influx
// and carbon exports. It reads the registry's current View and never blocks a scan.
func (a *Agent) samples() []series.Sample {
	var out []series.Sample
	// Only the live series: a walk of the view's live bits, not of every series kept (under
	// process churn, ~100 000 kept for ~2 000 live).
	a.reg.View().EachLatest(nil, nil, func(_ registry.Handle, smp series.Sample) bool {
		out = append(out, smp)
		return true
	})
	return out
}

// ecosystemRoutes mounts the exports (GET /metrics, GET --influx-path) and the InfluxDB-compatible
// ingest (POST /write, POST /api/v2/write, /ping for clients that check the server first).
// The exports show each caller only the series it may see (api.Server.SeriesVisible).
func (a *Agent) ecosystemRoutes(s *api.Server) {
	build := buildinfo.Get()
	a.mux.Handle("GET /metrics", export.PrometheusHandler(a.samples, export.Options{Visible: s.SeriesVisible, PerPID: a.cfg.MetricsPerPID,
		Timestamps: !a.cfg.MetricsNoTS, BuildInfo: &build, Mapper: promname.New(a.promOptions()), Gather: selfMetrics([]prometheus.Gatherer{a.notifier}, a.reloadMetrics()...)}))
	a.mux.Handle("GET "+a.cfg.InfluxPath, export.InfluxHandler(a.samples, export.Influx{Visible: s.SeriesVisible,
		HostTag: a.cfg.InfluxHostTag, Host: a.cfg.NodeName}))
	a.mux.Handle("POST /write", a.push.WriteHandler())
	a.mux.Handle("POST /api/v2/write", a.push.WriteHandlerV2())
	a.mux.Handle("/ping", ingest.PingHandler())
}
