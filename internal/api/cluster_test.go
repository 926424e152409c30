package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remote"
	"github.com/cantal-go/cantal/internal/testsupport/testpki"
)

// fakeCluster has fixed members and no remote subscriptions.
type fakeCluster struct{ members []remote.Member }

func (f fakeCluster) Query(context.Context, string, bool) []remote.NodeAnswer   { return nil }
func (f fakeCluster) Listen(context.Context, string, bool, func(remote.Update)) {}
func (f fakeCluster) Members() []remote.Member                                  { return f.members }

// TestClusterHistoryDoesNotReuseConnections: a peer that was fetched from once and then
// vanished (its cable cut: the kept-alive connection stays open but nothing answers on it) must
// be reported unreachable after a fresh connection attempt, bounded by ClusterTimeout, instead
// of the request waiting on the old connection for the whole fetch deadline.
func TestClusterHistoryDoesNotReuseConnections(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			select { // a peer that no longer answers
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte(`{"series":[{"labels":{"metric":"m"},"kind":"float","points":[[1,2]]}]}`))
	}))
	defer peer.Close()
	defer close(release)

	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
		ClusterTimeout: 200 * time.Millisecond,
		Cluster:        fakeCluster{[]remote.Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(peer.URL, "http://"), Up: true}}}}
	mux := http.NewServeMux()
	srv.Register(mux)

	fetch := func() map[string]struct{ Status, Error string } {
		t.Helper()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster/history?match=m&window=1m", nil))
		var ans struct {
			Nodes []struct{ Node, Status, Error string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("cluster history: %v in %s", err, rec.Body)
		}
		out := map[string]struct{ Status, Error string }{}
		for _, n := range ans.Nodes {
			out[n.Node] = struct{ Status, Error string }{n.Status, n.Error}
		}
		return out
	}
	if got := fetch()["peer"]; got.Status != "ok" {
		t.Fatalf("first fetch: peer = %+v; want ok", got)
	}
	peer.Listener.Close() // new connections are refused; a kept-alive one would still reach the handler
	got := fetch()["peer"]
	if got.Status != "unreachable" {
		t.Errorf("after the peer vanished: peer = %+v; want unreachable", got)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the vanished peer's handler was entered %d times; want once (a reused connection waits for the whole fetch deadline)", n)
	}
}

// TestFinding10_ClusterHistoryOverTLS: a member with a TLS configuration is fetched from over
// HTTPS with the node's certificate; a peer that wants a certificate of the cluster answers
// nothing to a plain fetch or a foreign certificate.
func TestFinding10_ClusterHistoryOverTLS(t *testing.T) {
	ca, err := testpki.NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := testpki.NewCA("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	peerID, _ := ca.NewNode("peer", net.IPv4(127, 0, 0, 1))
	mine, _ := ca.NewNode("me", net.IPv4(127, 0, 0, 1))
	impostor, _ := foreign.NewNode("me", net.IPv4(127, 0, 0, 1))
	impostor.CA = ca
	var reached atomic.Int32
	peer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte(`{"series":[{"labels":{"metric":"m"},"kind":"float","points":[[1,2]]}]}`))
	}))
	peer.TLS = peerID.ServerTLS()
	peer.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	peer.StartTLS()
	defer peer.Close()
	addr := strings.TrimPrefix(peer.URL, "https://")

	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	fetch := func(m remote.Member) (status, errMsg string) {
		t.Helper()
		srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
			ClusterTimeout: time.Second, Cluster: fakeCluster{[]remote.Member{m}}}
		mux := http.NewServeMux()
		srv.Register(mux)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster/history?match=m&window=1m", nil))
		var ans struct {
			Nodes []struct {
				Node, Status, Error string
				Series              []json.RawMessage
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("cluster history: %v in %s", err, rec.Body)
		}
		for _, n := range ans.Nodes {
			if n.Node == "peer" {
				if n.Status == "ok" && len(n.Series) != 1 {
					t.Errorf("peer ok with %d series; want 1", len(n.Series))
				}
				return n.Status, n.Error
			}
		}
		t.Fatalf("no peer in %s", rec.Body)
		return "", ""
	}
	if st, msg := fetch(remote.Member{ID: "p", Name: "peer", HTTP: addr, Up: true, TLS: mine.ClientTLS()}); st != "ok" {
		t.Fatalf("fetch with the cluster's certificate: %s (%s); want ok", st, msg)
	}
	n := reached.Load()
	for name, m := range map[string]remote.Member{
		"plain":               {ID: "p", Name: "peer", HTTP: addr, Up: true},
		"foreign certificate": {ID: "p", Name: "peer", HTTP: addr, Up: true, TLS: impostor.ClientTLS()},
	} {
		if st, _ := fetch(m); st != "unreachable" {
			t.Errorf("%s fetch: %s; want unreachable", name, st)
		}
	}
	if got := reached.Load(); got != n {
		t.Errorf("%d fetches without a certificate of the cluster reached the peer; want none", got-n)
	}
}
