package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/netns"
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
	t.Parallel() // two at a time (-parallel: GOMAXPROCS); each owns its lab (see harness_test.go)
	lab := newLab(t, 5, "10.77.7")
	ctx := context.Background()
	for _, h := range lab.Hosts() {
		how, err := setLoss(ctx, h, 30)
		if err != nil {
			t.Fatalf("30%% loss on %s: %v", h.Name(), err)
		}
		if h.Name() == "h1" {
			t.Logf("loss by %s", how)
		}
	}
	// The loss is real: datagrams from h1 reach h2 about 70% of the time.
	delivered := udpDelivery(t, lab.Hosts()[0], lab.Hosts()[1], 400)
	t.Logf("lab check: %.0f%% of 400 UDP datagrams from h1 reached h2 (30%% loss on the link: ~70%% expected)", 100*delivered)
	if delivered < 0.55 || delivered > 0.85 {
		t.Fatalf("%.0f%% of UDP datagrams delivered with 30%% loss set; want about 70%%", 100*delivered)
	}
	nodes := startNodes(t, lab)

	// The joins run over TCP, which retransmits; a failed attempt is retried as an operator
	// would, and logged.
	took := formCluster(t, nodes, lossyBound, lossyBound)
	t.Logf("MEASURE lossy convergence (30%% loss on every link): e added at a → all 5 nodes list all others alive in %s",
		took.Round(time.Millisecond))

	// Watch it for a while: lossy links may make a node suspect another for a moment, and
	// that is reported, but it must end whole again.
	var flaps []string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if err := allKnowAll(nodes); err != nil {
			flaps = append(flaps, err.Error())
		}
	}
	t.Logf("MEASURE lossy steady state: %d of 20 membership checks over 10 s saw a node not alive: %v", len(flaps), flaps)
	waitFor(t, lossyBound, func() error { return allKnowAll(nodes) })
}

// setLoss makes host h lose percent of its packets silently, as a lossy link does. With tc
// netem in the kernel that is Host.SetLoss (netem on eth0's egress). Without it, Host.SetLoss
// falls back to an nftables drop in the output hook, which is not silent: the sender's
// sendto fails with EPERM, so memberlist would know its packet was lost. Instead the drop goes
// into the host's prerouting hook (the receiving end of the link): every packet crossing a
// link is still lost with the same probability, and nobody is told.
func setLoss(ctx context.Context, h *netns.Host, percent int) (string, error) {
	if _, err := h.Exec(ctx, "tc", "qdisc", "replace", "dev", "lo", "root", "netem", "loss", "0%"); err == nil {
		h.Exec(ctx, "tc", "qdisc", "del", "dev", "lo", "root")
		return "tc netem on each host's egress", h.SetLoss(ctx, percent)
	}
	rules := fmt.Sprintf("add table inet cantal_e2e_loss\n"+
		"add chain inet cantal_e2e_loss in { type filter hook prerouting priority -300; policy accept; }\n"+
		"add rule inet cantal_e2e_loss in iifname \"eth0\" numgen random mod 100 < %d drop\n", percent)
	cmd := h.Command(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no tc netem in this kernel, and nftables failed: %w: %s", err, out)
	}
	return "nftables in each host's prerouting hook (this kernel has no tc netem)", nil
}

// udpDelivery sends n datagrams from host from to host to and returns the fraction received.
func udpDelivery(t *testing.T, from, to *netns.Host, n int) float64 {
	t.Helper()
	var pc net.PacketConn
	if err := inNS(to.NS, func() error {
		var err error
		pc, err = net.ListenPacket("udp", net.JoinHostPort(to.IP, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	conn, err := dialIn(context.Background(), from.NS, "udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan int)
	go func() {
		buf := make([]byte, 64)
		count := 0
		for {
			pc.SetReadDeadline(time.Now().Add(time.Second))
			if _, _, err := pc.ReadFrom(buf); err != nil {
				got <- count
				return
			}
			count++
		}
	}()
	for i := range n {
		if _, err := conn.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // stay clear of socket buffer limits
	}
	return float64(<-got) / float64(n)
}
