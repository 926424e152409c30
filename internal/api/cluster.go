package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/clusteragg"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/querylimit"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// Cluster is what the cluster routes need: the peers' series through remote subscriptions, and
// the peers themselves for direct history fetches. A nil Cluster answers for the local node only.
//
// A member whose TLS is set (a cluster with mutual TLS) is fetched from over HTTPS with that
// client configuration, never over plain HTTP.
type Cluster interface {
	Query(ctx context.Context, match string, rate bool) []hub.NodeAnswer
	Listen(ctx context.Context, match string, rate bool, fn func(hub.Update))
	Members() []hub.Member
}

// LatestQuerier is implemented by a Cluster that answers the peers' current values without
// their history (hub.Hub): cluster/metrics asks it, so that a first metrics query waits only
// for each reachable peer's latest values, never for a history chunk. A Cluster without it is
// asked Query.
type LatestQuerier interface {
	QueryLatest(ctx context.Context, match string, rate bool) []hub.NodeAnswer
}

func (s *Server) registerCluster(mux *http.ServeMux) {
	handle(mux, "/api/v1/cluster/metrics", map[string]http.HandlerFunc{"GET": s.clusterMetrics})
	handle(mux, "/api/v1/cluster/history", map[string]http.HandlerFunc{"GET": s.clusterHistory})
}

// localSamples returns the latest live samples matching q, labelled with the node.
func (s *Server) localSamples(q Query) []series.Sample {
	var out []series.Sample
	s.Registry.View().EachLatest(q.Sel, q.Visible, func(_ registry.Handle, smp series.Sample) bool {
		smp.Labels = apiwire.WithNode(smp.Labels, s.NodeName)
		out = append(out, smp)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Labels.Key() < out[j].Labels.Key() })
	return out
}

type aggregate struct {
	labels series.Labels
	kind   series.Kind
	n      int
	value  float64
	rateN  int
	rate   float64
}

// serverTiming sets the Server-Timing header (W3C Server Timing) of a cluster answer: how long
// this node took for the peers' part (peers: the hub's query, waits included) and for the
// whole answer (total, until it is written), in milliseconds. A client that sees a slow answer
// can so tell a node slow to answer from an answer slow to reach it.
func serverTiming(w http.ResponseWriter, start time.Time, peers time.Duration) {
	w.Header().Set("Server-Timing", fmt.Sprintf("peers;dur=%.2f, total;dur=%.2f",
		float64(peers)/float64(time.Millisecond), float64(time.Since(start))/float64(time.Millisecond)))
}

// clusterQuery is what both cluster routes read from a request: the query, the visibility of
// the peers' series for the caller, the aggregation and its grouping, and the nodes selected
// (with the context that asks only them).
type clusterQuery struct {
	Query
	peerVisible func(series.Labels) bool
	agg         string
	grouping    clusteragg.Grouping
	nodes       nodeSelection
	ctx         context.Context
}

func (s *Server) parseClusterQuery(r *http.Request, defWindow time.Duration) (clusterQuery, error) {
	q, err := s.parseQuery(r, defWindow)
	if err != nil {
		return clusterQuery{}, err
	}
	cq := clusterQuery{Query: q, peerVisible: s.PeerSeriesVisible(r.Context())}
	if cq.agg, cq.grouping, err = parseAgg(r.URL.Query()); err != nil {
		return clusterQuery{}, err
	}
	if cq.nodes, cq.ctx, err = s.selectNodes(r, &cq.Query); err != nil {
		return clusterQuery{}, err
	}
	return cq, nil
}

func (s *Server) clusterMetrics(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var peersTook time.Duration
	cq, err := s.parseClusterQuery(r, 0)
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	q, peerVisible, agg, grouping, ns, ctx := cq.Query, cq.peerVisible, cq.agg, cq.grouping, cq.nodes, cq.ctx
	type nodeSeries struct {
		node   string
		status hub.NodeState
		since  int64
		errMsg string
		series []series.Sample
	}
	var nodes []nodeSeries
	if ns.want(s.NodeName) {
		var local []series.Sample
		if !s.local(w, r, func() { local = s.localSamples(q) }) {
			return // no query slot came free (answered)
		}
		nodes = append(nodes, nodeSeries{node: s.NodeName, status: hub.OK, series: local})
	}
	if s.Cluster != nil {
		query := s.Cluster.Query
		if lq, ok := s.Cluster.(LatestQuerier); ok {
			query = lq.QueryLatest
		}
		t0 := time.Now()
		answers := query(ctx, ns.match, q.Rate)
		peersTook = time.Since(t0)
		for _, a := range answers {
			if !ns.want(a.Node) {
				continue // a Cluster that asked every node all the same
			}
			n := nodeSeries{node: a.Node, status: a.Status, since: a.Since, errMsg: a.Error}
			for _, sr := range a.Series {
				if peerVisible != nil && !peerVisible(sr.Latest.Labels) {
					continue
				}
				if sr.Latest.TS != 0 || sr.Latest.Kind == series.State {
					n.series = append(n.series, sr.Latest)
				}
			}
			nodes = append(nodes, n)
		}
	}
	known := s.knownNodes()
	for _, n := range nodes {
		known = append(known, n.node)
	}
	for _, n := range ns.unknown(known) {
		nodes = append(nodes, nodeSeries{node: n, status: statusUnknown, errMsg: unknownError})
	}
	b := append(make([]byte, 0, 4096), `{"nodes":[`...)
	groups := map[string]*aggregate{}
	var order []string
	for i, n := range nodes {
		if i > 0 {
			b = append(b, ',')
		}
		b = (&apiwire.NodeHead{Node: n.node, Status: string(n.status), Since: n.since, Error: n.errMsg}).AppendJSON(b)
		b = append(b, `,"series":[`...)
		for j := range n.series {
			smp := &n.series[j]
			if j > 0 {
				b = append(b, ',')
			}
			b = smp.AppendJSON(b)
			if agg == "" || smp.Kind == series.State || n.status == hub.Unreachable {
				continue
			}
			base := grouping.Key(smp.Labels)
			key := base.Key()
			g := groups[key]
			if g == nil {
				g = &aggregate{labels: base, kind: smp.Kind}
				groups[key] = g
				order = append(order, key)
			}
			g.value = clusteragg.Combine(agg, g.value, smp.Float(), g.n == 0)
			g.n++
			if smp.HasRate {
				g.rate = clusteragg.Combine(agg, g.rate, smp.Rate, g.rateN == 0)
				g.rateN++
			}
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"aggregate":[`...)
	sort.Strings(order)
	for i, key := range order {
		g := groups[key]
		if i > 0 {
			b = append(b, ',')
		}
		v, rt := g.value, g.rate
		if agg == "avg" {
			v /= float64(g.n)
			if g.rateN > 0 {
				rt /= float64(g.rateN)
			}
		}
		a := apiwire.Aggregate{Labels: g.labels, Kind: g.kind.String(), Fn: agg, Value: apiwire.Float(v), Nodes: g.n}
		if g.rateN > 0 {
			a.Rate = apiwire.Float(rt)
		}
		b = a.AppendJSON(b)
	}
	b = append(b, "]}\n"...)
	serverTiming(w, start, peersTook)
	writeRaw(w, b)
}

// HistoryKeeper is implemented by a Cluster whose subscriptions keep a chunk of every peer's
// history (hub.Hub): cluster history windows up to Kept are answered from it.
type HistoryKeeper interface {
	Kept() time.Duration
}

// maxHistoryFetches bounds the peers fetched from at once for a cluster history window longer
// than the kept chunk.
const maxHistoryFetches = 16

// clusterHistory answers every node's history for the window: the local one from the store,
// the peers' from the points their remote subscriptions keep and backfill (one subscription per
// peer and selector, reused by every query: no request to the peers, and a peer that is down is
// answered at once with what was kept, status unreachable or stale), when the window fits in
// what the Cluster keeps (HistoryKeeper). A longer window is fetched from each peer's own
// /api/v1/history, at most maxHistoryFetches at once, all under one deadline, skipping peers
// the membership says are down.
func (s *Server) clusterHistory(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var peersTook time.Duration
	cq, err := s.parseClusterQuery(r, 5*time.Minute)
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	q, peerVisible, agg, grouping, ns, ctx := cq.Query, cq.peerVisible, cq.agg, cq.grouping, cq.nodes, cq.ctx
	type result struct {
		node, status, errMsg string
		since                int64
		body                 json.RawMessage         // the series array, written
		series               []apiwire.HistorySeries // or a peer's series, decoded (body nil)
	}
	now := time.Now().UnixMilli()
	limit := answerLimit(w)
	var results []result
	if ns.want(s.NodeName) {
		var local []byte
		complete := true
		if !s.local(w, r, func() { local, complete = nodeHistoryJSON(nil, s.Registry, q, now, limit, s.NodeName) }) {
			return // no query slot came free (answered)
		}
		if !complete {
			tooLarge(w, limit)
			return
		}
		if !querylimit.Reserve(w, cap(local)) {
			return // held while the peers answer: within the answer budget, or 503 busy
		}
		results = append(results, result{node: s.NodeName, status: "ok", body: local})
	}
	if hk, ok := s.Cluster.(HistoryKeeper); ok && q.Window <= hk.Kept() {
		from := now - q.Window.Milliseconds()
		t0 := time.Now()
		answers := s.Cluster.Query(ctx, ns.match, q.Rate)
		peersTook = time.Since(t0)
		for _, a := range answers {
			if !ns.want(a.Node) {
				continue // a Cluster that asked every node all the same
			}
			res := result{node: a.Node, status: string(a.Status), errMsg: a.Error, since: a.Since}
			res.body = keptHistoryJSON(nil, a.Series, from, q.Rate, peerVisible)
			results = append(results, res)
		}
	} else if s.Cluster != nil {
		members := slices.DeleteFunc(slices.Clone(s.Cluster.Members()), func(m hub.Member) bool { return !ns.want(m.Name) })
		params := peerHistoryParams(r.URL.Query(), ns.match)
		rs := make([]result, len(members))
		ctx, cancel := context.WithTimeout(r.Context(), s.ClusterTimeout+10*time.Second)
		defer cancel()
		errs := hub.FanOut(ctx, members, maxHistoryFetches, func(ctx context.Context, i int, m hub.Member) error {
			body, err := s.fetch().Get(ctx, m, "/api/v1/history?"+params.Encode(), maxPeerHistory)
			if err == nil {
				rs[i].series = peerHistorySeries(body, m.Name, peerVisible)
			}
			return err
		})
		for i, m := range members {
			rs[i].node, rs[i].status = m.Name, "ok"
			if errs[i] != nil {
				rs[i].status, rs[i].errMsg = "unreachable", errs[i].Error()
			}
		}
		peersTook = time.Since(start)
		sort.Slice(rs, func(i, j int) bool { return rs[i].node < rs[j].node })
		results = append(results, rs...)
	}
	known := s.knownNodes()
	for _, res := range results {
		known = append(known, res.node)
	}
	for _, n := range ns.unknown(known) {
		results = append(results, result{node: n, status: statusUnknown, errMsg: unknownError})
	}
	b := []byte(`{"nodes":[`)
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = (&apiwire.NodeHead{Node: res.node, Status: res.status, Since: res.since, Error: res.errMsg}).AppendJSON(b)
		b = append(b, `,"series":`...)
		if res.body == nil {
			b = apiwire.AppendHistoryList(b, res.series)
		} else {
			b = append(b, res.body...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if agg != "" {
		nodes := make([]aggNode, len(results))
		for i, res := range results {
			nodes[i] = aggNode{body: res.body, series: res.series, ongoing: res.status != "ok"}
		}
		b = append(b, `,"aggregate":`...)
		b = appendHistoryAggregate(b, agg, grouping, nodes)
	}
	b = append(b, "}\n"...)
	serverTiming(w, start, peersTook)
	writeRaw(w, b)
}

// keptHistoryJSON appends the series array of a peer's history from the points its remote
// subscription keeps: numeric series (with their node label) that have points since from, in
// the shape of HistoryJSON's series; those visible refuses are left out.
func keptHistoryJSON(b []byte, srs []hub.Series, from int64, rate bool, visible func(series.Labels) bool) []byte {
	b = append(b, '[')
	n := 0
	for _, sr := range srs {
		if sr.Latest.Kind == series.State || visible != nil && !visible(sr.Latest.Labels) {
			continue
		}
		i := sort.Search(len(sr.Points), func(i int) bool { return sr.Points[i].TS >= from })
		pts := sr.Points[i:]
		if len(pts) == 0 {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		fn := ""
		if rate && sr.Latest.Kind == series.Counter {
			fn = "rate"
		}
		b = apiwire.AppendSeriesHead(b, sr.Latest.Labels.Key(), sr.Latest.Kind.String(), fn)
		b = append(b, `,"points":[`...)
		for j, p := range pts {
			if j > 0 {
				b = append(b, ',')
			}
			b = apiwire.Point{TS: p.TS, Value: apiwire.Float(p.Value)}.AppendJSON(b)
		}
		b = append(b, "]}"...)
	}
	return append(b, ']')
}

// maxPeerHistory bounds a peer's /api/v1/history answer.
const maxPeerHistory = 256 << 20

// Fetcher is the client of the cluster routes' requests to peers (hub.Fetcher), made once:
// the cluster-wide Prometheus API (internal/promcluster) asks the peers with it too.
func (s *Server) Fetcher() *hub.Fetcher { return s.fetch() }

// fetch is the client of the cluster routes' requests to peers (hub.Fetcher), made once.
func (s *Server) fetch() *hub.Fetcher {
	s.fetcherOnce.Do(func() { s.fetcher = &hub.Fetcher{Timeout: s.ClusterTimeout} })
	return s.fetcher
}

// peerHistorySeries reads a peer's /api/v1/history answer (apiwire.HistoryAnswer, decoded
// once) and returns the series the caller may see (visible nil: all), each with the node
// label set. An answer it cannot read gives no series.
func peerHistorySeries(body []byte, node string, visible func(series.Labels) bool) []apiwire.HistorySeries {
	var ans apiwire.HistoryAnswer
	if ans.UnmarshalJSON(body) != nil {
		return nil
	}
	kept := ans.Series[:0]
	for _, sr := range ans.Series {
		if sr.Labels == nil {
			sr.Labels = series.Labels{}
		}
		if visible != nil && !visible(sr.Labels) {
			continue // the caller may not see it (a peer's process)
		}
		sr.Labels["node"] = node // a map of its own, decoded from this answer
		kept = append(kept, sr)
	}
	clear(ans.Series[len(kept):])
	return kept
}
