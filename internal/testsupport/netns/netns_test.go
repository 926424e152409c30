package netns

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func newLab(t *testing.T, n int) *Lab {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatalf("network namespaces unavailable (these tests need root): %v", err)
	}
	lab, err := New(context.Background(), n, Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return lab
}

func ping(ctx context.Context, from *Host, to string) error {
	_, err := from.Exec(ctx, "ping", "-c", "1", "-W", "1", to)
	return err
}

// reach pings until one answer comes back or 10 s have passed: on a loaded machine one echo
// can take longer than ping's 1 s wait, so a single try would call a reachable host unreachable.
// The opposite check (a host that must not answer) needs no retry: load only delays answers.
func reach(ctx context.Context, from *Host, to string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(ctx, from, to)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

func listNamespaces(t *testing.T) []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	return Namespaces(string(out))
}

func TestPingCutHealTeardown(t *testing.T) {
	ctx := context.Background()
	lab := newLab(t, 2)
	h1, h2 := lab.Hosts()[0], lab.Hosts()[1]
	if h1.IP != "10.77.0.1" || h2.IP != "10.77.0.2" {
		t.Fatalf("host IPs %s, %s; want 10.77.0.1, 10.77.0.2", h1.IP, h2.IP)
	}
	if err := reach(ctx, h1, h2.IP); err != nil {
		t.Fatalf("h1 cannot ping h2: %v", err)
	}
	if err := reach(ctx, h2, h1.IP); err != nil {
		t.Fatalf("h2 cannot ping h1: %v", err)
	}
	if err := h2.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ping(ctx, h1, h2.IP); err == nil {
		t.Fatalf("h1 pings h2 through a cut link")
	}
	if err := h2.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	// The link takes a moment to come back up.
	if err := reach(ctx, h1, h2.IP); err != nil {
		t.Fatalf("h1 cannot ping h2 after heal: %v", err)
	}

	// The host sees only its own network: eth0 and lo.
	out, err := h1.Exec(ctx, "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; n != 2 {
		t.Errorf("h1 has %d links; want lo and eth0:\n%s", n, out)
	}

	names := []string{h1.NS, h2.NS, lab.bridge}
	if err := lab.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := lab.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	left := listNamespaces(t)
	for _, ns := range names {
		for _, l := range left {
			if l == ns {
				t.Errorf("namespace %s left behind after Close", ns)
			}
		}
	}
}

func TestLoss(t *testing.T) {
	ctx := context.Background()
	lab := newLab(t, 2)
	h1, h2 := lab.Hosts()[0], lab.Hosts()[1]
	if err := h1.SetLoss(ctx, 30); err != nil {
		t.Fatal(err)
	}
	const n = 300
	// ping exits 1 when replies are missing; the summary line is what counts.
	out, _ := h1.Command(ctx, "ping", "-q", "-c", strconv.Itoa(n), "-i", "0.005", "-W", "1", h2.IP).CombinedOutput()
	m := regexp.MustCompile(`(\d+) received`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no ping summary:\n%s", out)
	}
	got, _ := strconv.Atoi(string(m[1]))
	// 30% loss of 300: 210 expected, standard deviation 8; accept 5 deviations either way.
	if got < 170 || got > 250 {
		t.Errorf("with 30%% loss %d of %d pings answered; want about 210", got, n)
	}
	if err := h1.SetLoss(ctx, 0); err != nil {
		t.Fatal(err)
	}
	out, err := h1.Exec(ctx, "ping", "-q", "-c", "50", "-i", "0.005", "-W", "1", h2.IP)
	if err != nil || !strings.Contains(string(out), " 0% packet loss") {
		t.Errorf("after removing loss: %v\n%s", err, out)
	}
	if err := h1.SetLoss(ctx, 101); err == nil {
		t.Errorf("SetLoss(101) succeeded")
	}
}

func TestStartAllAndClose(t *testing.T) {
	lab := newLab(t, 3)
	procs, err := lab.StartAll(func(h *Host) (string, []string) {
		// Each host prints its own address, then waits to be killed.
		return "sh", []string{"-c", "ip -4 -o addr show dev eth0; exec sleep 1000"}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		want := lab.Hosts()[i].IP + "/24"
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(p.Output(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("host %d printed %q; want its address %s", i+1, p.Output(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	procs[0].Kill()
	if err := procs[0].Err(); err == nil {
		t.Errorf("killed process exited cleanly")
	}
	if err := procs[1].Stop(time.Second); err == nil {
		t.Errorf("terminated sleep exited cleanly")
	}
	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-procs[2].Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("Close left a process running")
	}
	if _, err := lab.Hosts()[0].Start("true"); err == nil {
		t.Errorf("Start after Close succeeded")
	}
}

func TestNamespaces(t *testing.T) {
	got := Namespaces("a (id: 0)\nb\n\n  \ncantaltest-x-h1 (id: 3)\n")
	want := []string{"a", "b", "cantaltest-x-h1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Namespaces = %q; want %q", got, want)
	}
}

func TestNewRejectsBadSize(t *testing.T) {
	for _, n := range []int{0, 255} {
		if lab, err := New(context.Background(), n, Options{}); err == nil {
			lab.Close()
			t.Errorf("New(%d) succeeded", n)
		}
	}
}

// TestPermanentNeighboursAndPartition checks that every host has a permanent neighbour entry for
// every other, and that Partition splits the lab in two halves that still reach inside and
// not across, until HealPartition.
func TestPermanentNeighboursAndPartition(t *testing.T) {
	ctx := context.Background()
	lab := newLab(t, 4)
	hs := lab.Hosts()
	out, err := hs[0].Exec(ctx, "ip", "neigh", "show", "dev", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range hs[1:] {
		want := regexp.MustCompile(regexp.QuoteMeta(o.IP) + ` lladdr ` + regexp.QuoteMeta(o.MAC) + ` PERMANENT`)
		if !want.Match(out) {
			t.Errorf("h1 has no permanent neighbour entry %s → %s:\n%s", o.IP, o.MAC, out)
		}
	}
	if err := lab.Partition(ctx, hs[2:]); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to int
		reach    bool
	}{{0, 1, true}, {2, 3, true}, {0, 2, false}, {3, 1, false}} {
		check := ping
		if c.reach {
			check = reach
		}
		err := check(ctx, hs[c.from], hs[c.to].IP)
		if (err == nil) != c.reach {
			t.Errorf("partitioned: h%d → h%d reachable %v, want %v (%v)", c.from+1, c.to+1, err == nil, c.reach, err)
		}
	}
	if err := lab.HealPartition(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reach(ctx, hs[0], hs[3].IP); err != nil {
		t.Errorf("healed: h1 cannot ping h4: %v", err)
	}
}
