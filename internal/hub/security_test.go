package hub

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/testsupport/testpki"
)

// tlsPeer is a fakePeer behind HTTPS that requires a client certificate of ca, counting the
// requests that reached it.
func tlsPeer(t *testing.T, ca *testpki.CA, f http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	id, err := ca.NewNode("peer", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		f.ServeHTTP(w, r)
	}))
	srv.TLS = id.ServerTLS()
	srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &reached
}

// TestSubscriptionsOverTLSNeedClusterCert: a hub of a TLS cluster subscribes over WSS with its
// certificate; a hub with a foreign certificate, with none, or a plain hub gets nothing, and
// a TLS hub never falls back to plain WebSocket.
//
// Security finding 10.
func TestSubscriptionsOverTLSNeedClusterCert(t *testing.T) {
	ca, foreign := mustCA(t, "cluster CA"), mustCA(t, "foreign CA")
	f := &fakePeer{drop: make(chan struct{}), got: make(chan struct{}, 16)}
	f.add(time.Now().Add(-time.Second).UnixMilli(), 7)
	srv, reached := tlsPeer(t, ca, f)
	addr := strings.TrimPrefix(srv.URL, "https://")
	members := func() []Member { return []Member{{ID: "p", Name: "peer", HTTP: addr, Up: true}} }

	mine, err := ca.NewNode("me", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := foreign.NewNode("me", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	impostor.CA = ca // trusts the cluster, but its certificate is foreign
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	query := func(cfg Config) NodeAnswer {
		cfg.Members, cfg.Interval, cfg.Timeout = members, time.Second, 2*time.Second
		h := New(cfg)
		go h.Run(ctx)
		ans := h.Query(ctx, "m", false)
		if len(ans) != 1 {
			t.Fatalf("Query = %+v; want one node", ans)
		}
		return ans[0]
	}

	if a := query(Config{TLS: mine.ClientTLS}); a.Status != OK || len(a.Series) != 1 {
		t.Fatalf("TLS hub with the cluster's certificate: %+v; want ok with the peer's series", a)
	}
	n := reached.Load()
	for name, cfg := range map[string]Config{
		"plain hub":              {},
		"foreign certificate":    {TLS: impostor.ClientTLS},
		"TLS hub without a cert": {TLS: func() *tls.Config { return nil }},
		"peer of a foreign CA":   {TLS: func() *tls.Config { c := mine.ClientTLS(); return withRoots(c, foreign) }},
	} {
		if a := query(cfg); a.Status == OK || len(a.Series) != 0 {
			t.Errorf("%s: %+v; want unreachable, no series", name, a)
		}
	}
	if got := reached.Load(); got != n {
		t.Errorf("%d requests reached the peer's handler without a certificate of the cluster; want none", got-n)
	}

	h := New(Config{Members: members, TLS: mine.ClientTLS})
	if ms := h.Members(); len(ms) != 1 || ms[0].TLS == nil {
		t.Errorf("Members of a TLS hub = %+v; want the TLS configuration set", ms)
	}
	h = New(Config{Members: members, TLS: func() *tls.Config { return nil }})
	if ms := h.Members(); len(ms) != 1 || ms[0].TLS == nil {
		t.Errorf("Members of a TLS hub without a certificate = %+v; want a TLS configuration that refuses, not plain", ms)
	}
}

func mustCA(t *testing.T, name string) *testpki.CA {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// withRoots returns c verifying peers against ca instead.
func withRoots(c *tls.Config, ca *testpki.CA) *tls.Config {
	n := &testpki.Node{CA: ca}
	v := n.ClientTLS().VerifyConnection
	c.VerifyConnection = v
	return c
}

// updatingPeer answers a subscription with an empty history, then an update every 20 ms.
type updatingPeer struct{}

func (updatingPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, req, ok := acceptSubscription(w, r)
	if !ok {
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	hist, _ := json.Marshal(map[string]any{"type": "history", "id": req["id"], "series": []any{}})
	if c.Write(ctx, websocket.MessageText, hist) != nil {
		return
	}
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		now := time.Now().UnixMilli()
		upd, _ := json.Marshal(map[string]any{"type": "update", "id": req["id"], "ts": now, "series": []any{
			map[string]any{"labels": map[string]string{"metric": "m"}, "kind": "float", "value": i, "ts": now}}})
		if c.Write(ctx, websocket.MessageText, upd) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestListenerCalledWithoutLocks: a listener may call back into the hub (here a Query of the
// same selector, which reads the very subscription being updated) without deadlocking.
func TestListenerCalledWithoutLocks(t *testing.T) {
	srv := httptest.NewServer(updatingPeer{})
	defer srv.Close()
	h := New(Config{Members: func() []Member {
		return []Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	}, Interval: time.Second, Timeout: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	got := make(chan int, 1)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go h.Listen(lctx, "m", false, func(u Update) {
		ans := h.Query(lctx, "m", false) // takes the subscription's lock
		select {
		case got <- len(ans):
		default:
		}
	})
	select {
	case n := <-got:
		if n != 1 {
			t.Errorf("Query inside the listener answered %d nodes; want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no update reached the listener, or the listener deadlocked calling the hub")
	}
}
