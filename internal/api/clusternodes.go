package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/selector"
)

// maxNodeNames bounds the names of a cluster query's node= parameter.
const maxNodeNames = 256

// nodeSelection is which nodes a cluster query asks. A node's series carry its name as their
// node label only in cluster answers (no node stores it), so the selector's node matchers
// ({node="n2"}, {node=~"web-.*"}) are applied to the nodes' names, not sent to the nodes; the
// node= parameter (comma-separated names) selects nodes by name too. A node is asked when it
// passes both; the others are not asked at all.
type nodeSelection struct {
	match    string             // the selector without its node matchers: what the nodes are asked
	matchers []selector.Matcher // the selector's node matchers
	names    map[string]bool    // node=, nil when not given
	// named are the nodes the query names exactly (node= and node="x"), in order: one that is
	// no member of the cluster is reported as unknown, not as a node with no data.
	named []string
}

// parseNodeSelection reads the node matchers of sel (the query's parsed match) and the node=
// parameter of v.
func parseNodeSelection(v url.Values, sel *selector.Selector) (nodeSelection, error) {
	ns := nodeSelection{match: v.Get("match")}
	var rest []string
	for _, m := range sel.Matchers() {
		if m.Name != "node" {
			rest = append(rest, m.String())
			continue
		}
		ns.matchers = append(ns.matchers, m)
		if m.Op == selector.Equal && !slices.Contains(ns.named, m.Value) {
			ns.named = append(ns.named, m.Value)
		}
	}
	if len(ns.matchers) > 0 {
		ns.match = "{" + strings.Join(rest, ", ") + "}"
	}
	if _, ok := v["node"]; ok {
		ns.names = map[string]bool{}
		for _, n := range strings.Split(v.Get("node"), ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			if len(ns.names) == maxNodeNames {
				return ns, fmt.Errorf("bad node: more than %d names", maxNodeNames)
			}
			ns.names[n] = true
			if !slices.Contains(ns.named, n) {
				ns.named = append(ns.named, n)
			}
		}
		if len(ns.names) == 0 {
			return ns, fmt.Errorf("bad node: no name (want node=NAME[,NAME...])")
		}
	}
	return ns, nil
}

// restricts reports whether the query selects nodes at all.
func (ns *nodeSelection) restricts() bool { return ns.names != nil || len(ns.matchers) > 0 }

// want reports whether the node called name is asked.
func (ns *nodeSelection) want(name string) bool {
	if ns.names != nil && !ns.names[name] {
		return false
	}
	for i := range ns.matchers {
		if !ns.matchers[i].Matches(name) {
			return false
		}
	}
	return true
}

// unknown returns the nodes the query names that are not among known.
func (ns *nodeSelection) unknown(known []string) []string {
	var out []string
	for _, n := range ns.named {
		if !slices.Contains(known, n) {
			out = append(out, n)
		}
	}
	return out
}

// unknownNode is what a cluster answer says of a node the query names that is no member of
// the cluster: status "unknown", distinct from a node that answered with no series.
const (
	statusUnknown = "unknown"
	unknownError  = "no such node in the cluster"
)

// selectNodes reads the query's node selection and narrows q.Sel to what the nodes are asked;
// it returns the context under which the peers are asked (only the selected ones).
func (s *Server) selectNodes(r *http.Request, q *Query) (nodeSelection, context.Context, error) {
	ns, err := parseNodeSelection(r.URL.Query(), q.Sel)
	if err != nil || !ns.restricts() {
		return ns, r.Context(), err
	}
	if q.Sel, err = selector.Parse(ns.match); err != nil {
		return ns, nil, fmt.Errorf("bad match: %w", err) // cannot happen: the matchers parsed
	}
	return ns, hub.WithNodes(r.Context(), ns.want), nil
}

// knownNodes are the names of this node and of every member of the cluster, up or down.
func (s *Server) knownNodes() []string {
	known := []string{s.NodeName}
	if s.Cluster != nil {
		for _, m := range s.Cluster.Members() {
			known = append(known, m.Name)
		}
	}
	return known
}

// peerHistoryParams are the parameters of a peer's /api/v1/history for a cluster history
// query v: its window and fn, the selector without its node matchers.
func peerHistoryParams(v url.Values, match string) url.Values {
	out := url.Values{}
	for _, k := range []string{"window", "fn"} {
		if x, ok := v[k]; ok {
			out[k] = x
		}
	}
	if match != "" {
		out.Set("match", match)
	}
	return out
}
