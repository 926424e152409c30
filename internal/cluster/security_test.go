package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/cantal-go/cantal/internal/logbudget"
	"github.com/cantal-go/cantal/internal/testsupport/testpki"
)

func newCA(t *testing.T, name string) *testpki.CA {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newNodeCert(t *testing.T, ca *testpki.CA, cn string) *testpki.Node {
	t.Helper()
	n, err := ca.NewNode(cn, net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tlsConfig is testConfig for a node of a cluster with mutual TLS, with its own TLS stream
// listener; id is nil for a node without a certificate.
func tlsConfig(t *testing.T, name, key string, id *testpki.Node) Config {
	cfg := testConfig(t, name, "tls")
	cfg.KeyFile = key
	cfg.JoinTimeout = 300 * time.Millisecond
	if id != nil {
		cfg.ClientTLS = id.ClientTLS
		cfg.ServerTLS = id.ServerTLS()
	}
	return cfg
}

// TestJoinNeedsClusterCertAndKey: in a cluster with mutual TLS and a gossip key, a node joins only
// with both a certificate of the cluster's CA and the key; a node with a foreign certificate,
// without the key, with a wrong key, or without TLS, cannot join in either direction, and
// nobody lists it. The stream listener speaks TLS only and wants a client certificate.
//
// Security finding 10.
func TestJoinNeedsClusterCertAndKey(t *testing.T) {
	ca, foreign := newCA(t, "cluster CA"), newCA(t, "foreign CA")
	key := writeKey(t, []byte("0123456789abcdef0123456789abcdef"))
	wrongKey := writeKey(t, []byte("fedcba9876543210fedcba9876543210"))
	a := start(t, tlsConfig(t, "a", key, newNodeCert(t, ca, "a")))
	b := start(t, tlsConfig(t, "b", key, newNodeCert(t, ca, "b")))
	c := start(t, tlsConfig(t, "c", key, newNodeCert(t, ca, "c")))
	for _, n := range []*Cluster{b, c} {
		if got, err := n.Join(a.Local().Addr); got != 1 || err != nil {
			t.Fatalf("%s.Join(a) = %d, %v; want 1, nil", n.ID(), got, err)
		}
	}
	members := map[string]Status{"a": StatusAlive, "b": StatusAlive, "c": StatusAlive}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b, c}, members))
	if !a.IsLiveMemberIP(net.IPv4(127, 0, 0, 1)) || a.IsLiveMemberIP(net.IPv4(10, 9, 9, 9)) || a.IsLiveMemberIP(nil) {
		t.Errorf("IsLiveMemberIP: want true for the members' 127.0.0.1 only")
	}

	// Outsiders, each lacking one thing.
	foreignCert := tlsConfig(t, "x-foreign-cert", key, newNodeCert(t, foreign, "x"))
	// Trusts the cluster's CA but presents a foreign certificate.
	impostor := newNodeCert(t, foreign, "y")
	impostor.CA = ca
	foreignTrustsCA := tlsConfig(t, "x-foreign-trusts-ca", key, impostor)
	noKey := tlsConfig(t, "x-no-key", "", newNodeCert(t, ca, "x"))
	wrong := tlsConfig(t, "x-wrong-key", wrongKey, newNodeCert(t, ca, "x"))
	plain := testConfig(t, "x-plain", "tls")
	plain.KeyFile = key
	for _, cfg := range []Config{foreignCert, foreignTrustsCA, noKey, wrong, plain} {
		x := start(t, cfg)
		if got, err := x.Join(a.Local().Addr); got != 0 || !errors.Is(err, ErrNoMember) {
			t.Errorf("%s.Join(a) = %d, %v; want 0, %v", x.ID(), got, err, ErrNoMember)
		}
		if got, err := a.Join(x.Local().Addr); got != 0 || !errors.Is(err, ErrNoMember) {
			t.Errorf("a.Join(%s) = %d, %v; want 0, %v", x.ID(), got, err, ErrNoMember)
		}
		if p := x.Peers(); len(p) != 0 {
			t.Errorf("%s sees %v; want nobody", x.ID(), p)
		}
	}
	time.Sleep(500 * time.Millisecond)
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b, c}, members))

	// The stream port: plain HTTP gets no answer, TLS without a client certificate no stream.
	addr := a.tr.tcp.Addr().String()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(conn, "GET "+GossipPath+" HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: "+upgradeProto+"\r\n\r\n")
	// Go's TLS server answers a plain HTTP request with a 400 telling to use HTTPS.
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain upgrade request on the TLS stream port answered %s; want no answer or 400", resp.Status)
	}
	conn.Close()
	for name, cfg := range map[string]*tls.Config{
		"no client certificate": {InsecureSkipVerify: true},
		"foreign certificate":   newNodeCert(t, foreign, "z").ClientTLS(),
	} {
		cfg.VerifyConnection = nil // the client trusts anything: the server must refuse
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
		if err != nil {
			continue // refused in the handshake
		}
		if _, err := clientUpgrade(conn, addr, time.Now().Add(2*time.Second)); err == nil {
			t.Errorf("%s: the stream listener upgraded a TLS connection", name)
		}
		conn.Close()
	}
}

// TestStreamsViaHTTPNeedClientCert: with streams on the agent's HTTPS server (whose
// web config may only ask for client certificates), the stream handler itself refuses a
// request without a verified client certificate, and members still join through it.
//
// Security finding 10.
func TestStreamsViaHTTPNeedClientCert(t *testing.T) {
	ca := newCA(t, "cluster CA")
	key := writeKey(t, []byte("0123456789abcdef0123456789abcdef"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idH := newNodeCert(t, ca, "h")
	cfg := tlsConfig(t, "h", key, idH)
	cfg.BindAddr, cfg.HTTPAddr, cfg.StreamsViaHTTP, cfg.ServerTLS = ln.Addr().String(), ln.Addr().String(), true, nil
	h := start(t, cfg)
	mux := http.NewServeMux()
	mux.Handle(GossipPath, h.StreamHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = idH.ServerTLS() // VerifyClientCertIfGiven
	srv.StartTLS()
	t.Cleanup(srv.Close)

	o := start(t, tlsConfig(t, "o", key, newNodeCert(t, ca, "o")))
	if _, err := o.Join(h.Local().Addr); err != nil {
		t.Fatalf("o.Join(h via HTTPS): %v", err)
	}
	waitFor(t, 5*time.Second, statusIs([]*Cluster{h, o}, map[string]Status{"h": StatusAlive, "o": StatusAlive}))

	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest("GET", "https://"+ln.Addr().String()+GossipPath, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgradeProto)
	resp, err := anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("upgrade without a client certificate = %d; want 403", resp.StatusCode)
	}
}

// TestTLSNodeNeverListensPlain: a TLS node with its own stream listener needs a server
// certificate and a client CA; it never opens a plain listener instead.
//
// Security finding 10.
func TestTLSNodeNeverListensPlain(t *testing.T) {
	ca := newCA(t, "cluster CA")
	id := newNodeCert(t, ca, "a")
	cfg := tlsConfig(t, "a", "", id)
	cfg.ServerTLS = nil
	if c, err := New(cfg); err == nil {
		c.Shutdown()
		t.Errorf("New with ClientTLS and no ServerTLS succeeded; want an error")
	}
	cfg.ServerTLS = id.ServerTLS()
	cfg.ServerTLS.ClientCAs = nil
	if c, err := New(cfg); err == nil {
		c.Shutdown()
		t.Errorf("New with a ServerTLS without client CAs succeeded; want an error")
	}
}

// tarpit accepts TCP connections and never answers; it counts them.
type tarpit struct {
	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func newTarpit(t *testing.T) *tarpit {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tarpit{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tp.accepted.Add(1)
			tp.mu.Lock()
			tp.conns = append(tp.conns, c)
			tp.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		tp.mu.Lock()
		for _, c := range tp.conns {
			c.Close()
		}
		tp.mu.Unlock()
	})
	return tp
}

// TestJoinProvesMembership: a join of an address that is no member of the cluster
// (a closed port, an HTTP server, a silent port, a UDP-only port) fails with one text after at
// least JoinTimeout whatever the failure, and leaves nothing behind: no retry, nothing in the
// state directory. Concurrent joins are bounded.
//
// Security finding 11.
func TestJoinProvesMembership(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, "a", "test")
	cfg.PeersFile = filepath.Join(dir, "peers.json")
	cfg.JoinTimeout = 500 * time.Millisecond
	cfg.Tune = func(c *memberlist.Config) { fastTune(c); c.TCPTimeout = 500 * time.Millisecond }
	a := start(t, cfg)
	runBackground(t, a)

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello"))
	}))
	t.Cleanup(web.Close)
	silent := newTarpit(t)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	targets := map[string]string{
		"closed port": closedAddr,
		"HTTP server": strings.TrimPrefix(web.URL, "http://"),
		"silent port": silent.ln.Addr().String(),
		"UDP only":    udp.LocalAddr().String(),
		"no host":     "no-such-host.invalid:22682",
	}
	var texts []string
	for name, addr := range targets {
		start := time.Now()
		n, err := a.Join(addr)
		took := time.Since(start)
		if n != 0 || !errors.Is(err, ErrNoMember) {
			t.Errorf("Join(%s: %s) = %d, %v; want 0, %v", name, addr, n, err, ErrNoMember)
			continue
		}
		var je *JoinError
		if !errors.As(err, &je) || je.HTTPStatus() != http.StatusBadGateway {
			t.Errorf("Join(%s) error %v has no HTTP status 502", name, err)
		}
		if took < cfg.JoinTimeout {
			t.Errorf("Join(%s) failed after %s; want at least the join timeout %s, whatever the failure", name, took, cfg.JoinTimeout)
		}
		if took > 4*time.Second {
			t.Errorf("Join(%s) took %s; want the short join timeouts to bound it", name, took)
		}
		texts = append(texts, err.Error())
	}
	for _, tx := range texts[1:] {
		if tx != texts[0] {
			t.Errorf("join errors differ: %q and %q; want one text whatever the failure", texts[0], tx)
		}
	}
	if n, err := a.Join("a/b:1"); n != 0 || !errors.Is(err, ErrJoinAddr) {
		t.Errorf("Join(name/host:port) = %d, %v; want %v", n, err, ErrJoinAddr)
	}

	// Nothing is retried: the silent port sees no connection over several reconnect rounds.
	before := silent.accepted.Load()
	time.Sleep(5 * cfg.ReconnectInterval)
	if got := silent.accepted.Load(); got != before {
		t.Errorf("the silent port got %d more connections after the failed join; want none (no retry)", got-before)
	}
	a.mu.Lock()
	seeds := append([]string(nil), a.seeds...)
	a.mu.Unlock()
	if len(seeds) != 0 {
		t.Errorf("seeds after failed joins = %v; want none", seeds)
	}
	a.dirty = true
	a.persist()
	b, err := os.ReadFile(cfg.PeersFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, addr := range targets {
		if strings.Contains(string(b), addr) {
			t.Errorf("the peers file keeps the %s address %s:\n%s", name, addr, b)
		}
	}

	// At most maxJoins at once: the next is turned away at once.
	var wg sync.WaitGroup
	for range maxJoins {
		wg.Add(1)
		go func() { defer wg.Done(); a.Join(silent.ln.Addr().String()) }()
	}
	waitFor(t, 5*time.Second, func() string {
		if len(a.joins) < maxJoins {
			return "joins not all in progress yet"
		}
		return ""
	})
	start := time.Now()
	n, err := a.Join(silent.ln.Addr().String())
	if n != 0 || !errors.Is(err, ErrJoinBusy) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("join beyond %d in progress = %d, %v after %s; want %v at once", maxJoins, n, err, time.Since(start), ErrJoinBusy)
	}
	var je *JoinError
	if errors.As(err, &je) && je.HTTPStatus() != http.StatusTooManyRequests {
		t.Errorf("busy join has status %d; want 429", je.HTTPStatus())
	}
	wg.Wait()
}

// TestConfiguredPeersRetried: a --peer address is retried until it answers, and a
// join that proves membership lists the member (kept in the state directory by its id).
//
// Security finding 11.
func TestConfiguredPeersRetried(t *testing.T) {
	a := start(t, testConfig(t, "a", "test"))
	silent := newTarpit(t)
	cfg := testConfig(t, "b", "test")
	cfg.Peers = []string{silent.ln.Addr().String(), a.Local().Addr}
	cfg.PeersFile = filepath.Join(t.TempDir(), "peers.json")
	b := start(t, cfg)
	runBackground(t, b)
	waitFor(t, 5*time.Second, statusIs([]*Cluster{a, b}, map[string]Status{"a": StatusAlive, "b": StatusAlive}))
	waitFor(t, 10*time.Second, func() string {
		if n := silent.accepted.Load(); n < 2 {
			return fmt.Sprintf("the configured silent peer was tried %d times; want it retried", n)
		}
		return ""
	})
}

// countHandler counts the records it receives, by message prefix.
type countHandler struct {
	n       atomic.Int64
	mu      sync.Mutex
	summary []string
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.n.Add(1)
	if strings.Contains(r.Message, "suppressed") {
		h.mu.Lock()
		h.summary = append(h.summary, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// TestJunkPacketsLogThrottled: thousands of junk datagrams (each one an ERROR line
// of memberlist's) make at most the log budget of lines, and one summary says how many were
// held back.
//
// Security finding 14.
func TestJunkPacketsLogThrottled(t *testing.T) {
	h := &countHandler{}
	cfg := testConfig(t, "a", "test")
	cfg.KeyFile = writeKey(t, []byte("0123456789abcdef0123456789abcdef"))
	cfg.Logger = slog.New(h)
	a := start(t, cfg)
	base := h.n.Load()

	conn, err := net.Dial("udp", a.Local().Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const junk = 5000
	begin := time.Now()
	for i := range junk {
		conn.Write([]byte("junk packet " + strings.Repeat("x", i%64)))
		if i%500 == 499 {
			time.Sleep(10 * time.Millisecond) // let the node read them rather than the kernel drop them
		}
	}
	time.Sleep(500 * time.Millisecond)
	elapsed := time.Since(begin)
	got := h.n.Load() - base
	limit := int64(logbudget.Burst + logbudget.Rate*elapsed.Seconds() + 1)
	t.Logf("%d junk datagrams in %s: %d log lines (budget %d)", junk, elapsed.Round(time.Millisecond), got, limit)
	if got > limit {
		t.Errorf("%d junk datagrams made %d log lines in %s; want at most %d", junk, got, elapsed, limit)
	}
	if got == 0 {
		t.Errorf("junk datagrams made no log line at all; want the first few logged")
	}
	a.Shutdown() // reports what was held back
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.summary) != 1 || !strings.Contains(h.summary[0], "gossip log lines suppressed in the last 10s") {
		t.Errorf("summaries = %q; want one saying how many lines were suppressed", h.summary)
	}
}
