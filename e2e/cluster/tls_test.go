package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/testsupport/netns"
	"github.com/cantal-go/cantal/internal/testsupport/testpki"
)

// gossipPath is cluster.GossipPath (the e2e tests talk to the agent only over the network).
const gossipPath = "/api/v1/gossip"

// pki is the certificates of a TLS lab: the cluster's CA and a foreign one, in dir.
type pki struct {
	t       *testing.T
	dir     string
	ca      *testpki.CA
	foreign *testpki.CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{t: t, dir: t.TempDir()}
	var err error
	if p.ca, err = testpki.NewCA("cantal e2e cluster CA"); err != nil {
		t.Fatal(err)
	}
	if p.foreign, err = testpki.NewCA("foreign CA"); err != nil {
		t.Fatal(err)
	}
	return p
}

// webConfig writes a web config for a node named cn with a certificate of issuer (trusting
// trust as the cluster CA), for ip; client certificates are required and verified.
func (p *pki) webConfig(cn string, issuer, trust *testpki.CA, ip string) string {
	p.t.Helper()
	f, err := issuer.WriteNode(p.dir, cn, trust, net.ParseIP(ip))
	if err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(p.dir, cn+"-web.yml")
	yml := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  client_auth_type: RequireAndVerifyClientCert\n",
		f.Cert, f.Key, f.CA)
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// client returns a client identity of issuer named cn. With trustAll it checks nothing of the
// server (an attacker's client: whether it gets in is for the server to decide), else it
// verifies the server against issuer.
func (p *pki) client(cn string, issuer *testpki.CA, trustAll bool) *tls.Config {
	p.t.Helper()
	id, err := issuer.NewNode(cn)
	if err != nil {
		p.t.Fatal(err)
	}
	c := id.ClientTLS()
	if trustAll {
		c.VerifyConnection = nil
	}
	return c
}

func writeGossipKey(t *testing.T, dir, name string) string {
	t.Helper()
	k := make([]byte, 32)
	rand.Read(k)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent starts an agent named name on h with --cluster-name test and extra flags; the test
// reaches it from inside h's namespace with clientTLS (nil: plain HTTP).
func startAgent(t *testing.T, h *netns.Host, name string, clientTLS *tls.Config, extra ...string) *node {
	t.Helper()
	scheme := "http://"
	if clientTLS != nil {
		scheme = "https://"
	}
	n := &node{name: name, host: h, url: scheme + net.JoinHostPort(h.IP, port),
		gaddr: net.JoinHostPort(h.IP, port), state: t.TempDir()}
	n.tr = &http.Transport{DialContext: n.dial, TLSClientConfig: clientTLS, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	n.hc = &http.Client{Transport: n.tr, Timeout: 15 * time.Second}
	t.Cleanup(n.tr.CloseIdleConnections)
	args := append([]string{
		"--listen", n.gaddr,
		"--cluster-name", "test",
		"--node-name", name,
		"--interval", interval.String(),
		"--state-dir", n.state,
		"--rrdd-dir", t.TempDir(),
		"--log-level", "debug",
	}, extra...)
	p, err := h.Start(agentBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	n.proc = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent %s (%s) output, last 40 lines:\n%s", n.name, n.host.IP, tail(n.proc.Output(), 40))
		}
	})
	return n
}

// waitScanned waits until n answers its status with a scan done.
func waitScanned(t *testing.T, n *node) {
	t.Helper()
	waitFor(t, time.Minute, func() error {
		select {
		case <-n.proc.Done():
			return fmt.Errorf("agent %s exited: %v\n%s", n.name, n.proc.Err(), n.proc.Output())
		default:
		}
		var st struct {
			LastScan struct{ Scans int } `json:"last_scan"`
		}
		if err := n.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.LastScan.Scans < 1 {
			return errors.New("no scan yet")
		}
		return nil
	})
}

// probe is one request an outsider makes at a member: what it got, or why it got nothing.
type probe struct {
	route  string
	status int    // 0: no HTTP answer
	err    string // transport error (TLS refused, connection closed)
	body   string
}

// gotData reports whether the outsider got an answer other than a refusal.
func (p probe) gotData() bool { return p.status != 0 && p.status < 400 }

func (p probe) String() string {
	if p.status == 0 {
		return fmt.Sprintf("%s: no answer (%s)", p.route, p.err)
	}
	return fmt.Sprintf("%s: %d %q", p.route, p.status, strings.TrimSpace(p.body))
}

// outsiderRoutes are the routes an outsider tries: every read, a write, the WebSocket and the
// gossip stream.
var outsiderRoutes = []string{
	"GET /api/v1/status", "GET /api/v1/metrics?match=" + loadSel, "GET /api/v1/history?match=" + loadSel,
	"GET /api/v1/stats?match=" + loadSel, "GET /api/v1/processes", "GET /api/v1/peers",
	"GET /api/v1/cluster/metrics?match=" + loadSel, "GET /api/v1/cluster/history?match=" + loadSel,
	"GET /metrics", "GET /influx", "GET /", "POST /api/v1/peers", "WS /api/v1/ws", "UPGRADE " + gossipPath,
}

// probeAll makes every outsider request at target from inside ns, as scheme ("http" or
// "https" with clientTLS).
func probeAll(ns, target, scheme string, clientTLS *tls.Config) []probe {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialIn(ctx, ns, network, addr)
	}
	tr := &http.Transport{DialContext: dial, TLSClientConfig: clientTLS, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var out []probe
	for _, r := range outsiderRoutes {
		method, path, _ := strings.Cut(r, " ")
		p := probe{route: r}
		switch method {
		case "WS":
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ws := "ws"
			if scheme == "https" {
				ws = "wss"
			}
			c, resp, err := websocket.Dial(ctx, ws+"://"+target+path, &websocket.DialOptions{HTTPClient: hc})
			cancel()
			if resp != nil {
				p.status = resp.StatusCode
				if resp.Body != nil {
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					p.body = string(b)
				}
			}
			if err != nil {
				p.err = err.Error()
			} else {
				c.CloseNow()
			}
		default:
			var body io.Reader
			if method == "UPGRADE" {
				method = "GET"
			} else if method == "POST" {
				body = strings.NewReader(`{"addr":"10.0.0.1:22682"}`)
			}
			req, _ := http.NewRequest(method, scheme+"://"+target+path, body)
			if r == "UPGRADE "+gossipPath {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "cantal-gossip")
			}
			resp, err := hc.Do(req)
			if err != nil {
				p.err = err.Error()
				break
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			p.status, p.body = resp.StatusCode, string(b)
		}
		out = append(out, p)
	}
	return out
}

// peerNames returns the names and addresses n lists as peers.
func peerNames(n *node) (string, error) {
	ps, err := n.peers()
	if err != nil {
		return "", err
	}
	var s []string
	for _, p := range ps {
		s = append(s, p.Name+"@"+p.Addr+"("+p.Status+")")
	}
	return strings.Join(s, " "), nil
}

// TestTLSClusterRefusesNonMembers: three agents with mutual TLS (--web-config with the cluster CA as
// client CA) and a gossip key answer cluster queries and WebSocket subscriptions, their peer
// traffic being TLS; a fourth agent with a foreign certificate, with the cluster's certificate
// but a wrong gossip key, with no key, or without TLS is never a member and gets no data from
// any route or stream of theirs. POST /api/v1/peers (finding 11) answers one text whatever the
// address, needs the write role, and keeps nothing it could not prove.
//
// Security finding 10.
func TestTLSClusterRefusesNonMembers(t *testing.T) {
	t.Parallel() // two at a time (-parallel: GOMAXPROCS); each owns its lab (see harness_test.go)
	lab := newLab(t, 4, "10.77.8")
	hosts := lab.Hosts()
	p := newPKI(t)
	key := writeGossipKey(t, p.dir, "gossip.key")
	wrongKey := writeGossipKey(t, p.dir, "wrong.key")
	operator := p.client("operator", p.ca, false) // in --write-users
	reader := p.client("reader", p.ca, false)

	var members []*node
	for i, name := range []string{"a", "b", "c"} {
		h := hosts[i]
		extra := []string{"--web-config", p.webConfig(name, p.ca, p.ca, h.IP), "--gossip-key", key, "--write-users", "operator"}
		if i > 0 {
			extra = append(extra, "--peer", net.JoinHostPort(hosts[0].IP, port))
		}
		members = append(members, startAgent(t, h, name, operator, extra...))
	}
	for _, n := range members {
		waitScanned(t, n)
	}
	a, b := members[0], members[1]
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("MembersFormOverTLS", func(t *testing.T) {
		took := waitFor(t, 30*time.Second, func() error { return allKnowAll(members) })
		t.Logf("3 TLS members list each other alive %s after their first scan", took.Round(time.Millisecond))
	})

	step("ClusterQueriesWork", func(t *testing.T) {
		var ans map[string]apiwire.ClusterMetricsNode
		took := waitFor(t, 20*time.Second, func() error {
			var err error
			if ans, _, err = a.clusterMetrics(loadSel); err != nil {
				return err
			}
			return allAnswered(ans, members, 1)
		})
		t.Logf("MEASURE TLS cluster: cluster/metrics at a has a, b, c ok with series after %s: %s", took.Round(time.Millisecond), summary(ans))
		if len(ans) != 3 {
			t.Errorf("cluster/metrics at a lists %d nodes: %s; want a, b, c", len(ans), summary(ans))
		}
		hans, _, err := a.clusterHistory(loadSel, "window", "1m")
		if err != nil {
			t.Fatal(err)
		}
		if err := allAnswered(hans, members, 1); err != nil {
			t.Errorf("cluster/history at a: %v", err)
		}
	})

	step("WebSocketClusterStream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(ctx, "wss://"+a.gaddr+"/api/v1/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: a.tr}})
		if err != nil {
			t.Fatalf("wss at a with the operator's certificate: %v", err)
		}
		defer conn.CloseNow()
		conn.SetReadLimit(16 << 20)
		req, _ := json.Marshal(map[string]string{"type": "subscribe", "id": "l", "match": loadSel, "scope": "cluster"})
		if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for seen["a"] < 2 || seen["b"] < 2 || seen["c"] < 2 {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("updates so far %v: %v", seen, err)
			}
			var m apiwire.WSFrame
			json.Unmarshal(data, &m)
			if m.Type == "error" {
				t.Fatalf("subscription error: %s", m.Error)
			}
			if m.Type == "update" {
				seen[m.Node]++
			}
		}
		t.Logf("cluster WebSocket at a: updates from a, b, c: %v", seen)
	})

	step("PeerPortsAreTLSOnly", func(t *testing.T) {
		// What a fetched from b came over TLS: b's port answers plain HTTP, WebSocket and
		// gossip upgrades with no data, from a's own host.
		for _, pr := range probeAll(a.host.NS, b.gaddr, "http", nil) {
			if pr.gotData() {
				t.Errorf("plain %s at b got data: %s", pr.route, pr)
			}
		}
		// The node's certificate is enough for reads (the guard's rule for a verified client
		// certificate); a certificate not in --write-users cannot add peers.
		resp, err := postPeer(a, reader, net.JoinHostPort(hosts[3].IP, port))
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != http.StatusForbidden {
			t.Errorf("POST /api/v1/peers with a certificate not in --write-users = %d %s; want 403", resp.status, resp.body)
		}
	})

	d := hosts[3]
	outsiders := []struct {
		name        string
		args        []string
		client      *tls.Config // the outsider's own client identity, trusting any server
		queryD      *tls.Config // to read the outsider's own API; nil: plain HTTP
		noStart     bool        // the agent must refuse to start
		clusterCert bool        // its certificate is the cluster's: only the gossip stream opens
	}{
		{name: "foreign-cert", args: []string{"--web-config", p.webConfig("d-foreign", p.foreign, p.foreign, d.IP), "--gossip-key", key, "--read-users", "d-op"},
			client: p.client("d-foreign-client", p.foreign, true), queryD: p.client("d-op", p.foreign, false)},
		{name: "foreign-cert-trusting-cluster-ca", args: []string{"--web-config", p.webConfig("d-impostor", p.foreign, p.ca, d.IP), "--gossip-key", key, "--read-users", "d-impostor-op"},
			client: p.client("d-impostor-client", p.foreign, true), queryD: p.client("d-impostor-op", p.ca, true)},
		{name: "wrong-key", args: []string{"--web-config", p.webConfig("d-wrong-key", p.ca, p.ca, d.IP), "--gossip-key", wrongKey, "--read-users", "operator"},
			client: p.client("d-wrong-key-client", p.ca, true), queryD: operator, clusterCert: true},
		{name: "no-key", args: []string{"--web-config", p.webConfig("d-no-key", p.ca, p.ca, d.IP)}, noStart: true},
		{name: "plain", args: []string{"--gossip-key", key}},
	}
	for _, o := range outsiders {
		step("Outsider/"+o.name, func(t *testing.T) {
			args := append(o.args, "--peer", a.gaddr)
			x := startAgent(t, d, "d", o.queryD, args...)
			if o.noStart {
				select {
				case <-x.proc.Done():
					t.Logf("refused to start: %s", tail(x.proc.Output(), 1))
				case <-time.After(30 * time.Second):
					t.Fatal("an agent with a web config and a cluster but no gossip key started")
				}
				return
			}
			defer x.proc.Kill()
			waitScanned(t, x)
			// d joins at start and retries --peer every 5 s: watch for two rounds.
			for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
				for _, m := range members {
					ps, err := peerNames(m)
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(ps, "d@") || strings.Contains(ps, d.IP) {
						t.Fatalf("%s lists the outsider: %s", m.name, ps)
					}
				}
			}
			ps, err := x.peers()
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 0 {
				t.Errorf("the outsider lists peers %+v; want none", ps)
			}
			ans, _, err := x.clusterMetrics(loadSel)
			if err != nil {
				t.Fatal(err)
			}
			if len(ans) != 1 || ans["d"].Status != "ok" {
				t.Errorf("the outsider's cluster/metrics = %s; want itself only", summary(ans))
			}
			// Every route of a member, from the outsider's host with its own credentials.
			scheme := "http"
			if o.client != nil {
				scheme = "https"
			}
			var got []string
			for _, pr := range probeAll(d.NS, a.gaddr, scheme, o.client) {
				got = append(got, pr.String())
				if o.clusterCert && strings.HasPrefix(pr.route, "UPGRADE ") {
					continue // the stream opens; memberlist's encryption refuses it (below)
				}
				if pr.gotData() {
					t.Errorf("outsider %s got data from a: %s", o.name, pr)
				}
			}
			t.Logf("outsider %s at a: %s", o.name, strings.Join(got, "; "))
			if o.clusterCert {
				// The gossip stream opens (the certificate is the cluster's) but memberlist
				// refuses its state without the key: d is no member (checked above).
				if !strings.Contains(x.proc.Output(), "reconnect failed") {
					t.Errorf("the outsider never logged a failed join")
				}
			}
		})
	}

	step("JoinThroughAPIProvesMembership", func(t *testing.T) {
		// d's host: a closed port, a TCP server that is no cantal, a silent one.
		var lns []net.Listener
		var held, acceptors sync.WaitGroup
		stop := make(chan struct{})
		listen := func(serve func(net.Conn)) string {
			var ln net.Listener
			if err := inNS(d.NS, func() error {
				var err error
				ln, err = net.Listen("tcp", net.JoinHostPort(d.IP, "0"))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			lns = append(lns, ln)
			acceptors.Add(1)
			go func() {
				defer acceptors.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					held.Add(1) // before the deferred Wait can run: Accept happened first
					go func() { defer held.Done(); serve(c) }()
				}
			}()
			return ln.Addr().String()
		}
		defer func() {
			for _, ln := range lns {
				ln.Close()
			}
			acceptors.Wait() // no Add after this: every Accept has returned
			close(stop)
			held.Wait()
		}()
		targets := map[string]string{
			"closed port": net.JoinHostPort(d.IP, port),
			"http server": listen(func(c net.Conn) {
				defer c.Close()
				bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
			}),
			"silent port": listen(func(c net.Conn) {
				<-stop
				c.Close()
			}),
			"no such host": "no-such-host.invalid:22682",
		}
		var texts []string
		for name, addr := range targets {
			start := time.Now()
			r, err := postPeer(a, operator, addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("POST /api/v1/peers %s (%s): %d %s after %s", name, addr, r.status, strings.TrimSpace(r.body), time.Since(start).Round(time.Millisecond))
			if r.status != http.StatusBadGateway {
				t.Errorf("join of %s = %d; want 502", name, r.status)
			}
			var e struct{ Error string }
			json.Unmarshal([]byte(r.body), &e)
			texts = append(texts, strings.ReplaceAll(e.Error, addr, "ADDR"))
		}
		for _, tx := range texts[1:] {
			if tx != texts[0] {
				t.Errorf("join errors differ: %q vs %q; want one text whatever the address", texts[0], tx)
			}
		}
		time.Sleep(6 * time.Second) // a reconnect round
		ps, err := peerNames(a)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ps, d.IP) {
			t.Errorf("a lists a failed join's address: %s", ps)
		}
		state, _ := os.ReadFile(filepath.Join(a.state, "cluster-peers.json"))
		if bytes.Contains(state, []byte(d.IP)) || bytes.Contains(state, []byte("invalid")) {
			t.Errorf("a's state directory keeps a failed join:\n%s", state)
		}
	})
}

type postResult struct {
	status int
	body   string
}

// postPeer asks n, as the client identity id, to join addr.
func postPeer(n *node, id *tls.Config, addr string) (postResult, error) {
	tr := &http.Transport{DialContext: n.dial, TLSClientConfig: id, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	body, _ := json.Marshal(map[string]string{"addr": addr})
	resp, err := hc.Post(n.url+"/api/v1/peers", "application/json", bytes.NewReader(body))
	if err != nil {
		return postResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return postResult{resp.StatusCode, string(b)}, nil
}
