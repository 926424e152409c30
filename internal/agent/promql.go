package agent

import (
	"context"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/promcluster"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/promstore"
)

// promqlRoutes mounts Prometheus's query API at /prometheus/api/v1/ (package promapi) over
// the held history, its series named and labelled as remote write sends them (instance,
// node), each caller seeing only the series it may see (api.Server.SeriesVisible). Its
// requests take query slots like the other read routes (limitQueries). In a cluster the same
// API over every node's series is at /cluster/prometheus/api/v1/ (package promcluster), with
// the same limits and the same --query-max-concurrency slots; its peers' requests for a
// query's selectors come to apiwire.PeerSelectPath.
func (a *Agent) promqlRoutes(s *api.Server) {
	st := promstore.New(a.hist, promstore.RegistryCatalog(a.reg), promstore.Options{
		Namer:    promstore.MapperNamer(promname.New(a.promOptions())),
		Instance: a.cfg.NodeName + ":" + listenPort(a.cfg.Listen),
		Node:     a.cfg.NodeName,
		Visible:  s.SeriesVisible,
	})
	opt := promapi.Options{
		Timeout:        a.cfg.QueryTimeout,
		MaxSamples:     a.cfg.QueryMaxSamples,
		MaxConcurrency: a.cfg.QueryMaxConcurrency,
		Window:         a.cfg.History,
		Rules:          a.rules,
	}
	local := promapi.New(st, opt)
	a.mux.Handle(promapi.Prefix, local)
	if s.Cluster == nil {
		return
	}
	// The peers' requests for a cluster-wide query's selectors (package promcluster): this
	// node's series, as /prometheus gives them, under the same limits.
	a.mux.Handle(apiwire.PeerSelectPath, promcluster.PeerHandler(st, promcluster.PeerOptions{
		MaxSamples: a.cfg.QueryMaxSamples, Timeout: a.cfg.QueryTimeout}))
	opt.Prefix, opt.Share = promapi.ClusterPrefix, local
	cq := promcluster.New(st, promcluster.Options{
		Node:    a.cfg.NodeName,
		Members: s.Cluster.Members,
		// Its own client, keeping one connection per peer (the cluster routes' client opens
		// one per request): every query asks every peer.
		Fetch: &hub.Fetcher{Timeout: s.ClusterTimeout, KeepAlive: true},
		// A peer's process's owner is unknown here: a caller who may not see every process
		// sees no other node's process series, nor their label values.
		PeerMatchers: func(ctx context.Context) []*labels.Matcher {
			if s.PeerSeriesVisible(ctx) == nil {
				return nil
			}
			return []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "pid", "")}
		},
	})
	opt.Queryable, opt.Planner = cq, cq
	a.mux.Handle(promapi.ClusterPrefix, promapi.New(st, opt))
}
