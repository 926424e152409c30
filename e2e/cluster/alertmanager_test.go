package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/netns"
)

// amProxy stands between the agents and Alertmanager, in Alertmanager's host: it forwards every
// request and counts, per peer named by a node_down alert, the posts of each sender (by the
// sender's IP), so the test tells who sent what, which Alertmanager's own API does not say.
type amProxy struct {
	addr string // IP:port the agents post to
	am   string // Alertmanager's base URL
	hc   *http.Client

	mu    sync.Mutex
	posts map[string]map[string]int // peer → sender IP → node_down alerts posted
}

func (p *amProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost && r.URL.Path == "/api/v2/alerts" {
		var as []struct {
			Labels map[string]string `json:"labels"`
		}
		if json.Unmarshal(body, &as) == nil {
			ip, _, _ := net.SplitHostPort(r.RemoteAddr)
			p.mu.Lock()
			for _, a := range as {
				if a.Labels["alertname"] == "node_down" {
					peer := a.Labels["peer"]
					if p.posts[peer] == nil {
						p.posts[peer] = map[string]int{}
					}
					p.posts[peer][ip]++
				}
			}
			p.mu.Unlock()
		}
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.am+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := p.hc.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// senders returns the sender IPs that posted node_down for peer, with their counts.
func (p *amProxy) senders(peer string) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for ip, n := range p.posts[peer] {
		out[ip] = n
	}
	return out
}

var amListening = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

// startAlertmanager starts Debian's prometheus-alertmanager in host h on a port the kernel
// chooses, with its own storage and no cluster listener, and a counting proxy before it in the
// same host (the test's own socket, made in h's namespace).
func startAlertmanager(t *testing.T, h *netns.Host) *amProxy {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatalf("prometheus-alertmanager not installed (scripts/install-deps.sh): %v", err)
	}
	dir := t.TempDir()
	cfg := "route:\n  receiver: none\nreceivers:\n  - name: none\n"
	if err := os.WriteFile(filepath.Join(dir, "am.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	proc, err := h.Start(bin, "--config.file="+filepath.Join(dir, "am.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+net.JoinHostPort(h.IP, "0"), "--cluster.listen-address=")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("alertmanager output, last 20 lines:\n%s", tail(proc.Output(), 20))
		}
	})
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialIn(ctx, h.NS, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	p := &amProxy{hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, posts: map[string]map[string]int{}}
	waitFor(t, 30*time.Second, func() error {
		m := amListening.FindStringSubmatch(proc.Output())
		if m == nil {
			return fmt.Errorf("alertmanager not listening yet: %s", proc.Output())
		}
		p.am = "http://" + m[1]
		resp, err := p.hc.Get(p.am + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("alertmanager /-/ready: %s", resp.Status)
		}
		return nil
	})
	var ln net.Listener
	if err := inNS(h.NS, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(h.IP, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// nodeDownAtAM returns Alertmanager's unresolved node_down alerts for peer (GET /api/v2/alerts).
func (p *amProxy) nodeDownAtAM(peer string) ([]map[string]map[string]string, error) {
	resp, err := p.hc.Get(p.am + "/api/v2/alerts?filter=" + `alertname="node_down"`)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var all []struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		Status      struct{ State string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return nil, err
	}
	var out []map[string]map[string]string
	for _, a := range all {
		if a.Labels["alertname"] == "node_down" && a.Labels["peer"] == peer {
			out = append(out, map[string]map[string]string{"labels": a.Labels, "annotations": a.Annotations, "state": {"state": a.Status.State}})
		}
	}
	return out, nil
}

// localNodeDown reports whether n lists node_down for peer firing in its own /api/v1/alerts.
func (n *node) localNodeDown(peer string) (bool, error) {
	var ans struct {
		Alerts []struct {
			Name   string            `json:"name"`
			State  string            `json:"state"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := n.get("/api/v1/alerts", &ans); err != nil {
		return false, err
	}
	for _, a := range ans.Alerts {
		if a.Name == "node_down" && a.Labels["peer"] == peer && a.State == "firing" {
			return true, nil
		}
	}
	return false, nil
}

func (n *node) scans() (int, error) {
	var st struct {
		NodeID   string              `json:"node_id"`
		LastScan struct{ Scans int } `json:"last_scan"`
	}
	err := n.get("/api/v1/status", &st)
	return st.LastScan.Scans, err
}

// TestNodeDownReachesAlertmanagerOnce: three agents in network namespaces, each with
// --alertmanager pointing at one real Alertmanager (through a counting proxy). A killed node
// raises node_down on both survivors, but exactly one node_down alert for it reaches
// Alertmanager, posted only by the chosen sender (the lowest node id alive), its value the
// seconds since the node was last seen; then the chosen sender itself is killed, and exactly one
// node_down for it reaches Alertmanager, posted by the next lowest id.
func TestNodeDownReachesAlertmanagerOnce(t *testing.T) {
	t.Parallel() // two at a time (-parallel: GOMAXPROCS); each owns its lab (see harness_test.go)
	lab := newLab(t, 4, "10.77.10")
	hosts := lab.Hosts()
	px := startAlertmanager(t, hosts[3])
	nodes := startNodesOn(t, hosts[:3], "--alertmanager", "http://"+px.addr)
	formCluster(t, nodes, 30*time.Second, 30*time.Second)

	// The nodes by id: the first is the chosen sender, the second takes over when it dies.
	ids := map[*node]string{}
	for _, n := range nodes {
		var st struct {
			NodeID string `json:"node_id"`
		}
		if err := n.get("/api/v1/status", &st); err != nil || st.NodeID == "" {
			t.Fatalf("status of %s: id %q, %v", n.name, st.NodeID, err)
		}
		ids[n] = st.NodeID
	}
	order := append([]*node(nil), nodes...)
	sort.Slice(order, func(i, j int) bool { return ids[order[i]] < ids[order[j]] })
	first, second, last := order[0], order[1], order[2]
	t.Logf("by id: %s (%s), %s (%s), %s (%s)", first.name, ids[first], second.name, ids[second], last.name, ids[last])

	// downOnce kills victim and checks that exactly one node_down for it reaches Alertmanager,
	// from sender only, while every survivor lists it.
	downOnce := func(victim, sender *node, survivors []*node) {
		t.Helper()
		victim.proc.Kill()
		waitFor(t, 90*time.Second, func() error {
			as, err := px.nodeDownAtAM(victim.name)
			if err != nil {
				return err
			}
			if len(as) != 1 {
				return fmt.Errorf("alertmanager has %d node_down alerts for %s; want 1: %v", len(as), victim.name, as)
			}
			return nil
		})
		// Every survivor raised it, and has scanned (and so handed its alerts to its
		// notifier) three more times since: a survivor that would send it has had the chance.
		for _, n := range survivors {
			waitFor(t, 60*time.Second, func() error {
				ok, err := n.localNodeDown(victim.name)
				if err != nil || !ok {
					return fmt.Errorf("%s does not list node_down for %s firing (%v)", n.name, victim.name, err)
				}
				return nil
			})
			s0, err := n.scans()
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, func() error {
				s, err := n.scans()
				if err == nil && s < s0+3 {
					err = fmt.Errorf("%s at %d scans, want %d", n.name, s, s0+3)
				}
				return err
			})
		}
		as, err := px.nodeDownAtAM(victim.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 {
			t.Fatalf("alertmanager has %d node_down alerts for %s; want exactly 1: %v", len(as), victim.name, as)
		}
		a := as[0]
		if a["annotations"]["reported_by"] != sender.name || a["state"]["state"] != "active" {
			t.Errorf("node_down for %s at alertmanager: %v; want active, reported_by %s", victim.name, a, sender.name)
		}
		var v float64
		if _, err := fmt.Sscan(a["annotations"]["value"], &v); err != nil || v < 10 {
			t.Errorf("node_down for %s: value %q; want the seconds since it was last seen (≥ 10)", victim.name, a["annotations"]["value"])
		}
		got := px.senders(victim.name)
		if len(got) != 1 || got[sender.host.IP] == 0 {
			t.Errorf("node_down for %s posted by %v (sender IP → alerts); want only %s (%s), the chosen sender", victim.name, got, sender.name, sender.host.IP)
		}
		t.Logf("node_down for %s: %v at alertmanager; posts by sender %v", victim.name, a, got)
	}

	downOnce(last, first, []*node{first, second})
	downOnce(first, second, []*node{second})
	// last's alert is still one alert, now sent by second.
	as, err := px.nodeDownAtAM(last.name)
	if err != nil || len(as) != 1 {
		t.Errorf("after the sender changed: %d node_down alerts for %s (%v); want still 1: %v", len(as), last.name, err, as)
	}
}
