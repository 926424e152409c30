package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// floodCluster is a querying node whose one peer is a real API server (its WebSocket, with its
// bound of 256 subscriptions per connection), the node's hub configured by cfg.
func floodCluster(t *testing.T, cfg hub.Config) (*http.ServeMux, *hub.Hub) {
	t.Helper()
	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	ref := reg.Series(series.Labels{"metric": "load"}, series.Float)
	for k := int64(5); k >= 0; k-- {
		reg.Begin(time.Now().UnixMilli() - k*1000)
		reg.Put(ref, math.Float64bits(float64(k)))
		reg.Commit()
	}
	peerSrv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "peer"}
	peerMux := http.NewServeMux()
	peerSrv.Register(peerMux)
	peer := httptest.NewServer(peerMux)
	t.Cleanup(peer.Close)
	m := hub.Member{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(peer.URL, "http://"), Up: true}
	cfg.Members = func() []hub.Member { return []hub.Member{m} }
	cfg.Interval, cfg.Timeout = time.Second, 5*time.Second
	h := hub.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.Run(ctx)
	qreg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	srv := &Server{Registry: qreg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
		ClusterTimeout: time.Second, Cluster: h}
	mux := http.NewServeMux()
	srv.Register(mux)
	return mux, h
}

// peerEntry asks the cluster route for match as the client at addr and returns the peer's entry.
func peerEntry(t *testing.T, mux *http.ServeMux, route, match, addr string) (status, errMsg string, nseries int) {
	t.Helper()
	req := httptest.NewRequest("GET", "/api/v1/cluster/"+route+"?window=1m&match="+url.QueryEscape(match), nil)
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var ans struct {
		Nodes []struct {
			Node, Status, Error string
			Series              []json.RawMessage
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || rec.Code != 200 {
		t.Fatalf("cluster %s %s = %d %.300s", route, match, rec.Code, rec.Body)
	}
	for _, n := range ans.Nodes {
		if n.Node == "peer" {
			return n.Status, n.Error, len(n.Series)
		}
	}
	t.Fatalf("no peer entry in %s", rec.Body)
	return
}

// TestSelectorFloodKeepsPeerReported: one client asking for 331 distinct selectors, history
// and metrics alternately, gets its first 16 subscribed and the rest answered with the peer
// "busy" and why; many clients together get at most the node's 64; the peer is never shown
// unreachable, the selectors subscribed stay bounded, and a query with a selector in use (and
// every match-everything spelling of "all series", which share one subscription) is answered
// with the peer's data. Before, each selector kept a subscription and a 5-minute chunk per
// peer for 3 minutes, and past the peer's 256 subscriptions healthy peers showed unreachable.
// (Issue 31, N8.)
func TestSelectorFloodKeepsPeerReported(t *testing.T) {
	mux, h := floodCluster(t, hub.Config{})
	if st, e, n := peerEntry(t, mux, "metrics", "load", "198.51.100.7:1"); st != "ok" || n != 1 {
		t.Fatalf("a normal query before the flood: peer %s %q with %d series; want ok with 1", st, e, n)
	}
	busy := 0
	for i := range 331 {
		route := []string{"history", "metrics"}[i%2]
		st, e, _ := peerEntry(t, mux, route, fmt.Sprintf(`{metric="load", flood!="%d"}`, i), "192.0.2.1:1")
		switch {
		case st == "busy" && strings.Contains(e, "too many distinct cluster selectors"):
			busy++
		case st == "ok" && i < 16:
		default:
			t.Fatalf("flood selector %d (%s): peer %s %q; want ok for the first 16, then busy with the reason", i, route, st, e)
		}
	}
	if busy != 331-16 {
		t.Errorf("%d of 331 selectors of one client refused; want %d (16 per caller)", busy, 331-16)
	}
	// Many callers: together no more than the node's 64.
	for c := range 10 {
		for i := range 16 {
			st, e, _ := peerEntry(t, mux, "metrics", fmt.Sprintf(`{metric="load", caller="%d", i="%d"}`, c, i), fmt.Sprintf("203.0.113.%d:1", c+1))
			if st != "ok" && !(st == "busy" && strings.Contains(e, "on this node")) {
				t.Fatalf("caller %d selector %d: peer %s %q; want ok or busy (on this node)", c, i, st, e)
			}
		}
	}
	if n := h.Selectors(); n > 64 {
		t.Errorf("%d distinct selectors subscribed after the flood; want at most 64", n)
	}
	// A selector in use (the same series however spelled), and every spelling of "every
	// series" (one subscription, never refused), still get the peer's data.
	before := h.Selectors()
	for _, match := range []string{"load", `{metric="load"}`, `{metric="load",metric="load"}`, "", "{}", `{metric=~".*"}`, `{process=~".*", metric=~".*"}`} {
		if st, e, n := peerEntry(t, mux, "metrics", match, "198.51.100.99:1"); st != "ok" || n != 1 {
			t.Errorf("query %q after the flood: peer %s %q with %d series; want ok with 1", match, st, e, n)
		}
	}
	if n := h.Selectors(); n != before {
		t.Errorf("the queries of selectors in use and of every series took %d more selectors; want none", n-before)
	}
}

// TestPeerRefusalShownBusy: when the peer refuses a subscription (here: a hub allowed more
// selectors than the peer's 256 subscriptions per connection), the peer is shown "busy" with
// the peer's reason, at once, never unreachable, and the selectors it took are still answered.
// Before, it showed unreachable or stale after the query's whole wait. (Issue 31, N8.)
func TestPeerRefusalShownBusy(t *testing.T) {
	mux, _ := floodCluster(t, hub.Config{MaxSelectors: 1000, MaxSelectorsPerCaller: 1000})
	refused := 0
	for i := range 300 {
		st, e, _ := peerEntry(t, mux, "metrics", fmt.Sprintf(`{metric="load", flood!="%d"}`, i), "192.0.2.1:1")
		switch {
		case st == "ok" && i < 256:
		case st == "busy" && strings.Contains(e, "too many subscriptions"):
			refused++
		default:
			t.Fatalf("selector %d: peer %s %q; want ok within the peer's 256, then busy with its reason", i, st, e)
		}
	}
	if refused != 300-256 {
		t.Errorf("%d selectors refused by the peer; want %d", refused, 300-256)
	}
	// (The test's peer does not scan, so after its first update its data goes stale.)
	if st, e, n := peerEntry(t, mux, "metrics", `{metric="load", flood!="3"}`, "192.0.2.1:1"); st == "busy" || st == "unreachable" || n != 1 {
		t.Errorf("a selector the peer took, after its refusals: peer %s %q with %d series; want its series", st, e, n)
	}
}
