// Package testpki makes the certificates of a cluster with mutual TLS for tests: a cluster CA
// and node certificates (usable as server and client certificates, with the node's addresses
// in their SANs), and the tls.Configs a node uses with them. It is for tests only: keys are
// ECDSA P-256 made fresh each time and kept in memory or written where the test says.
package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/testsupport/certs"
)

// CA is a certificate authority: the cluster's, or a foreign one. It is made by package
// certs; this package adds the tls.Configs a cluster node uses.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the CA certificate, PEM
	Pool *x509.CertPool
	ca   *certs.CA
}

// NewCA makes a self-signed CA named name, valid from an hour ago for a day.
func NewCA(name string) (*CA, error) {
	c, err := certs.NewCA(name)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: c.Cert, PEM: c.CertPEM, Pool: c.Pool(), ca: c}, nil
}

// Issue makes a node certificate with common name cn and the given IPs in its SANs (and
// "localhost" as DNS name), for server and client authentication. It returns the certificate
// and key in PEM.
func (ca *CA) Issue(cn string, ips ...net.IP) (certPEM, keyPEM []byte, err error) {
	hosts := []string{"localhost"}
	for _, ip := range ips {
		hosts = append(hosts, ip.String())
	}
	p, err := ca.ca.Issue(cn, hosts...)
	return p.CertPEM, p.KeyPEM, err
}

// Node is one node's identity: its certificate and the CA it trusts.
type Node struct {
	Cert tls.Certificate
	CA   *CA // the CA the node verifies its peers with (its cluster's)
}

// NewNode issues a node certificate of ca for cn and ips; the node trusts ca.
func (ca *CA) NewNode(cn string, ips ...net.IP) (*Node, error) {
	c, k, err := ca.Issue(cn, ips...)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		return nil, err
	}
	return &Node{Cert: cert, CA: ca}, nil
}

// ServerTLS is the node's server side: its certificate, client certificates verified against
// its CA when given (as a web config with client_auth_type VerifyClientCertIfGiven).
func (n *Node) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{n.Cert},
		ClientCAs:    n.CA.Pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
	}
}

// ClientTLS is the node's client side towards its peers, as access.WebConfig.ClientTLS makes
// it: its certificate as client certificate, the peer verified by the agent's own check
// (access.VerifyClusterPeer: the chain against the CA, not the host name), so tests using it
// test what ships.
func (n *Node) ClientTLS() *tls.Config {
	cert := n.Cert
	roots := n.CA.Pool
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		InsecureSkipVerify:   true,
		VerifyConnection:     access.VerifyClusterPeer(roots),
	}
}

// Files are a node's PEM files on disk.
type Files struct {
	Cert, Key, CA string
}

// WriteNode issues a certificate of ca for cn and ips and writes it, its key and the CA
// certificate trusted (trust: the cluster CA, ca itself when nil) into dir as cn.crt, cn.key
// and cn-ca.crt.
func (ca *CA) WriteNode(dir, cn string, trust *CA, ips ...net.IP) (Files, error) {
	if trust == nil {
		trust = ca
	}
	c, k, err := ca.Issue(cn, ips...)
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, cn+".crt"), Key: filepath.Join(dir, cn+".key"), CA: filepath.Join(dir, cn+"-ca.crt")}
	for _, w := range []struct {
		path string
		b    []byte
	}{{f.Cert, c}, {f.Key, k}, {f.CA, trust.PEM}} {
		if err := os.WriteFile(w.path, w.b, 0o600); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}
