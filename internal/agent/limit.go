package agent

import (
	"net/http"
	"runtime"
	"strings"

	"github.com/cantal-go/cantal/internal/cluster"
)

// limitQueries admits at most n requests at a time to the handlers that read many series
// (metrics, history, stats, processes, the exports, the UI's files); the others wait their turn
// for as long as their client waits. A monitoring agent must not let its readers starve its
// scans: with one CPU kept free of queries (n = GOMAXPROCS-1), an API hammered by clients slows
// the answers down, not the scans. Exempt, because they wait rather than compute or must stay
// cheap: WebSocket and gossip streams (upgrades), cluster queries (they wait on peers),
// /api/v1/status and /debug/pprof/.
func limitQueries(next http.Handler, n int) http.Handler {
	sem := make(chan struct{}, max(1, n))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if queryExempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return // the client gave up while waiting
		}
		defer func() { <-sem }()
		next.ServeHTTP(w, r)
	})
}

func queryExempt(r *http.Request) bool {
	p := r.URL.Path
	return r.Header.Get("Upgrade") != "" ||
		p == "/api/v1/status" || p == cluster.GossipPath ||
		strings.HasPrefix(p, "/api/v1/cluster/") || strings.HasPrefix(p, "/debug/pprof/")
}

// queryConcurrency is how many limited requests run at once: all CPUs but one.
func queryConcurrency() int { return max(1, runtime.GOMAXPROCS(0)-1) }
