package cluster

import (
	"context"
	"testing"
	"time"
)

// lossyBound is how long membership may take to converge with 30% loss on every link. Every
// host drops 30% of what it sends, so a UDP probe and its ack both arrive only 49% of the time;
// memberlist repairs this with indirect probes, TCP fallback probes and the periodic push-pull
// state exchange (every 15 s), so a few push-pull rounds is the expected worst case.
const lossyBound = 45 * time.Second

// TestLossyMembershipConverges: five agents started with 30% packet loss (tc netem, or nftables
// where the kernel lacks netem) on every host's link; one peer added at a; every node ends up
// listing every other as alive (joined as formCluster does, through the API).
func TestLossyMembershipConverges(t *testing.T) {
	lab := newLab(t, 5, "10.77.7")
	ctx := context.Background()
	for _, h := range lab.Hosts() {
		if err := h.SetLoss(ctx, 30); err != nil {
			t.Fatalf("30%% loss on %s: %v", h.Name(), err)
		}
	}
	nodes := startNodes(t, lab)

	// The joins run over TCP, which retransmits; a failed attempt is retried as an operator
	// would, and logged.
	took := formCluster(t, nodes, lossyBound, lossyBound)
	t.Logf("MEASURE lossy convergence (30%% loss on every link): e added at a → all 5 nodes list all others alive in %s",
		took.Round(time.Millisecond))

	// Still whole a while later: loss alone does not make nodes declare each other dead.
	time.Sleep(5 * time.Second)
	waitFor(t, lossyBound, func() error { return allKnowAll(nodes) })
}
