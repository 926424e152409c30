package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/selector"
)

// The distinct selectors a hub subscribes to at its peers are bounded (issue 31, N8): each costs
// a subscription at every peer, a history chunk per peer for a history query, and a share of
// each peer's subscriptions per connection. A selector already subscribed costs nothing more, so
// it is always served; a new one is admitted only below Config.MaxSelectors in all and
// Config.MaxSelectorsPerCaller for the caller that asks first (WithCaller). Past either, the
// query's peers are answered with status Busy and the reason, without a subscription: a flood
// of selectors from one client neither grows the node nor uses up the peers' subscriptions, and
// healthy peers are never shown unreachable for it. Selectors are compared in a canonical form
// (canonicalMatch), so that those that select the same series share one subscription, and every
// selector that matches everything is the one subscription "", always admitted and counted in
// neither bound (there is one per function, however many ask for it).

// callerKey is the context key of the caller's name for the per-caller bound.
type callerKey struct{}

// WithCaller returns ctx naming the caller of the queries made with it (a user name, a client
// certificate's name, a Unix uid, a network address): what Config.MaxSelectorsPerCaller counts by.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func callerOf(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}

// selUse is one distinct selector (by subKey) the hub has admitted.
type selUse struct {
	caller   string // who asked first: whose share it takes
	lastUsed time.Time
}

// BusyError is why a query's new selector was not subscribed to.
type BusyError struct {
	Max       int
	PerCaller bool
	Idle      time.Duration
}

func (e *BusyError) Error() string {
	who := "on this node"
	if e.PerCaller {
		who = "for this caller"
	}
	return fmt.Sprintf("busy: too many distinct cluster selectors in use %s (at most %d); one is freed %s after its last query: reuse a selector already in use or retry later", who, e.Max, e.Idle)
}

// admit records a query's use of the selector key by caller, admitting it when it is new and
// within the bounds; it returns a *BusyError when not.
func (h *Hub) admit(key, caller string, now time.Time) error {
	if key == subKey("", false) || key == subKey("", true) {
		return nil // every series: one subscription however many ask, never refused
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if u := h.sels[key]; u != nil {
		u.lastUsed = now
		return nil
	}
	if len(h.sels) >= h.cfg.MaxSelectors {
		return &BusyError{Max: h.cfg.MaxSelectors, Idle: h.cfg.Idle}
	}
	if h.callerSels[caller] >= h.cfg.MaxSelectorsPerCaller {
		return &BusyError{Max: h.cfg.MaxSelectorsPerCaller, PerCaller: true, Idle: h.cfg.Idle}
	}
	h.sels[key] = &selUse{caller: caller, lastUsed: now}
	h.callerSels[caller]++
	return nil
}

// expireSelectors forgets the selectors not used for longer than idle; h.mu is held. Their
// subscriptions go idle at the same time and are dropped by the peers' expiry.
func (h *Hub) expireSelectors(now time.Time) {
	for k, u := range h.sels {
		if now.Sub(u.lastUsed) > h.cfg.Idle {
			delete(h.sels, k)
			if h.callerSels[u.caller]--; h.callerSels[u.caller] <= 0 {
				delete(h.callerSels, u.caller)
			}
		}
	}
}

// Selectors is how many distinct selectors the hub subscribes to (at most Config.MaxSelectors).
func (h *Hub) Selectors() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sels)
}

// canonicalMatch is the form of a selector its subscriptions go by: its matchers sorted and
// without repeats, those that match every value (name=~".*") left out, so that a selector that
// matches every series is "". A selector that does not parse is kept as it is (the peer refuses
// it with the reason).
func canonicalMatch(match string) string {
	sel, err := selector.Parse(match)
	if err != nil {
		return match
	}
	var ms []string
	for _, m := range sel.Matchers() {
		if m.Op == selector.MatchRegexp && m.Value == ".*" {
			continue
		}
		ms = append(ms, m.String())
	}
	if len(ms) == 0 {
		return ""
	}
	slices.Sort(ms)
	ms = slices.Compact(ms)
	return "{" + strings.Join(ms, ", ") + "}"
}
