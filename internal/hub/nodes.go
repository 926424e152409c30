package hub

import "context"

// nodesKey is the context key of WithNodes.
type nodesKey struct{}

// WithNodes returns a context under which Hub.Query and Hub.QueryLatest ask only the members
// whose name want accepts (a cluster query that names its nodes, {node="n2"}, does not
// subscribe to the others). want must be safe for concurrent use.
func WithNodes(ctx context.Context, want func(node string) bool) context.Context {
	return context.WithValue(ctx, nodesKey{}, want)
}

// wantedMembers returns the members the context's WithNodes accepts (all without one).
func wantedMembers(ctx context.Context, ms []Member) []Member {
	want, _ := ctx.Value(nodesKey{}).(func(string) bool)
	if want == nil {
		return ms
	}
	out := ms[:0:0]
	for _, m := range ms {
		if want(m.Name) {
			out = append(out, m)
		}
	}
	return out
}
