package testpki

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
)

// handshake runs a TLS handshake between server and client over an in-memory pipe and returns
// the client's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv := tls.Server(a, server)
	go func() { srv.Handshake(); srv.Close() }()
	return tls.Client(b, client).Handshake()
}

// TestClientTLSIsTheAgentsPeerCheck: ClientTLS accepts a member of the cluster whatever its
// host name, and refuses a server whose certificate another CA issued with the agent's own
// error (access.VerifyClusterPeer), so the cluster TLS tests built on it test what ships.
func TestClientTLSIsTheAgentsPeerCheck(t *testing.T) {
	ca, err := NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := NewCA("foreign")
	if err != nil {
		t.Fatal(err)
	}
	member, err := ca.NewNode("n1", net.IPv4(10, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.NewNode("n2", net.IPv4(10, 0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := foreign.NewNode("x", net.IPv4(10, 0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	cfg := client.ClientTLS()
	cfg.ServerName = "not-in-any-san.invalid" // the host name is not checked
	if err := handshake(t, member.ServerTLS(), cfg); err != nil {
		t.Errorf("member refused: %v", err)
	}
	err = handshake(t, stranger.ServerTLS(), client.ClientTLS())
	if err == nil || !strings.Contains(err.Error(), "peer is not a member of this cluster") {
		t.Errorf("foreign server: %v; want the agent's refusal", err)
	}
}
