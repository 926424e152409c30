package agent

import (
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/promstore"
)

// promqlRoutes mounts Prometheus's query API at /prometheus/api/v1/ (package promapi) over
// the held history, its series named and labelled as remote write sends them (instance,
// node), each caller seeing only the series it may see (api.Server.SeriesVisible). Its
// requests take query slots like the other read routes (limitQueries).
func (a *Agent) promqlRoutes(s *api.Server) {
	st := promstore.New(a.hist, promstore.RegistryCatalog(a.reg), promstore.Options{
		Namer:    promstore.MapperNamer(promname.New(a.promOptions())),
		Instance: a.cfg.NodeName + ":" + listenPort(a.cfg.Listen),
		Node:     a.cfg.NodeName,
		Visible:  s.SeriesVisible,
	})
	a.mux.Handle(promapi.Prefix, promapi.New(st, promapi.Options{
		Timeout:        a.cfg.QueryTimeout,
		MaxSamples:     a.cfg.QueryMaxSamples,
		MaxConcurrency: a.cfg.QueryMaxConcurrency,
		Window:         a.cfg.History,
		Rules:          a.rules,
	}))
}
