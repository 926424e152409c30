package access

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
)

// WebConfig is a --web-config file in the exporter-toolkit format (the file every Prometheus
// exporter reads: tls_server_config, basic_auth_users with bcrypt hashes), kept current: the
// file, the certificate, the key and the client CA file are looked at again at most once a
// second and the configuration is rebuilt when one changed, so certificates rotate and users
// are added without a restart. A change that does not load (a bad file, a missing key) keeps
// the last good configuration and is reported by Err.
//
// The same certificate and key are the node's client identity towards its cluster peers, and
// the client CA file is what it verifies them with (ClientTLS).
//
// A WebConfig is safe for concurrent use.
type WebConfig struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	cur     *loaded
	checked time.Time
	lastErr error
}

// loaded is one version of the configuration; it is never changed once built.
type loaded struct {
	cfg    web.Config
	server *tls.Config // nil when the file has no tls_server_config
	client *tls.Config // the node's client side towards peers; nil without TLS
	stamps []fileStamp
}

type fileStamp struct {
	path  string
	mtime time.Time
	size  int64
	ino   uint64
}

func stampOf(path string) fileStamp {
	st := fileStamp{path: path}
	if fi, err := os.Stat(path); err == nil {
		st.mtime, st.size = fi.ModTime(), fi.Size()
		if s, ok := fi.Sys().(interface{ Ino() uint64 }); ok {
			st.ino = s.Ino()
		}
	}
	return st
}

// LoadWebConfig reads and checks the web config at path: the exporter-toolkit's own validation
// (strict YAML, bcrypt hashes, loadable certificate and key), and the agent's rules: the file
// must give a way to authenticate (basic_auth_users, or a client CA that verifies client
// certificates), since a web config is what makes the agent safe to expose.
func LoadWebConfig(path string) (*WebConfig, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("web config %s: %w", path, err)
	}
	w := &WebConfig{path: abs, now: time.Now}
	l, err := load(abs)
	if err != nil {
		return nil, err
	}
	w.cur, w.checked = l, w.now()
	return w, nil
}

func load(path string) (*loaded, error) {
	if err := web.Validate(path); err != nil {
		return nil, fmt.Errorf("web config %s: %w", path, err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("web config: %w", err)
	}
	// The defaults and the strict decoding are exporter-toolkit's (web.Validate above decoded
	// the same bytes the same way); the decoded form is needed here for the users and the
	// client side.
	l := &loaded{cfg: web.Config{
		TLSConfig:  web.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13},
		HTTPConfig: web.HTTPConfig{HTTP2: true},
	}}
	if err := yaml.UnmarshalStrict(content, &l.cfg); err != nil {
		return nil, fmt.Errorf("web config %s: %w", path, err)
	}
	l.cfg.TLSConfig.SetDirectory(filepath.Dir(path))
	tc := &l.cfg.TLSConfig
	l.stamps = append(l.stamps, stampOf(path))
	for _, p := range []string{tc.TLSCertPath, tc.TLSKeyPath, tc.ClientCAs} {
		if p != "" {
			l.stamps = append(l.stamps, stampOf(p))
		}
	}
	if tc.IsEnabled() {
		if l.server, err = web.ConfigToTLSConfig(tc); err != nil {
			return nil, fmt.Errorf("web config %s: %w", path, err)
		}
		if l.client, err = clientTLS(tc); err != nil {
			return nil, fmt.Errorf("web config %s: %w", path, err)
		}
	}
	hasCA := l.server != nil && l.server.ClientCAs != nil
	if len(l.cfg.Users) == 0 && !hasCA {
		return nil, fmt.Errorf("web config %s gives no way to authenticate a client: add basic_auth_users or a client_ca_file with client_auth_type", path)
	}
	if hasCA && (l.server.ClientAuth == tls.RequestClientCert || l.server.ClientAuth == tls.RequireAnyClientCert) {
		return nil, fmt.Errorf("web config %s: client_auth_type %q does not verify certificates; use VerifyClientCertIfGiven or RequireAndVerifyClientCert", path, tc.ClientAuth)
	}
	return l, nil
}

// clientTLS is the node's side of mutual TLS towards its peers: its own certificate and key as
// the client certificate, and the client CA as the roots that peers' server certificates must
// chain to. Peers are dialled by address and node certificates need not name it, so the host
// name is not checked; the chain to the cluster's CA is (Consul's default does the same).
func clientTLS(tc *web.TLSConfig) (*tls.Config, error) {
	var roots *x509.CertPool
	switch {
	case tc.ClientCAs != "":
		b, err := os.ReadFile(tc.ClientCAs)
		if err != nil {
			return nil, fmt.Errorf("client_ca_file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return nil, errors.New("client_ca_file holds no PEM certificate")
		}
	case tc.ClientCAsText != "":
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(tc.ClientCAsText)) {
			return nil, errors.New("client_ca holds no PEM certificate")
		}
	default:
		return nil, nil // no cluster CA: the node cannot take part in a secure cluster
	}
	certFile, keyFile := tc.TLSCertPath, tc.TLSKeyPath
	certPEM, keyPEM := []byte(tc.TLSCert), []byte(string(tc.TLSKey))
	getCert := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cp, kp := certPEM, keyPEM
		var err error
		if certFile != "" {
			if cp, err = os.ReadFile(certFile); err != nil {
				return nil, fmt.Errorf("cert_file: %w", err)
			}
		}
		if keyFile != "" {
			if kp, err = os.ReadFile(keyFile); err != nil {
				return nil, fmt.Errorf("key_file: %w", err)
			}
		}
		c, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			return nil, fmt.Errorf("node certificate: %w", err)
		}
		return &c, nil
	}
	if _, err := getCert(nil); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: getCert,
		// Verified in VerifyConnection against roots, without the host name.
		InsecureSkipVerify: true,
		VerifyConnection:   VerifyClusterPeer(roots),
	}, nil
}

// VerifyClusterPeer is the check a node makes of a peer it connects to (ClientTLS's
// VerifyConnection, with InsecureSkipVerify): the peer's chain must lead to roots, the
// cluster's CA, for server authentication; its host name is not checked (peers are reached by
// address). Exported so that test PKIs use this check, not a copy of it.
func VerifyClusterPeer(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("peer is not a member of this cluster: %w", err)
		}
		return nil
	}
}

// current returns the configuration in force, reloading it when a file changed (looked at no
// more than once a second).
func (w *WebConfig) current() *loaded {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if now.Sub(w.checked) < time.Second {
		return w.cur
	}
	w.checked = now
	changed := false
	for _, s := range w.cur.stamps {
		if stampOf(s.path) != s {
			changed = true
			break
		}
	}
	if !changed {
		return w.cur
	}
	l, err := load(w.path)
	if err != nil {
		w.lastErr = err
		return w.cur
	}
	w.cur, w.lastErr = l, nil
	return w.cur
}

// Reload looks at the files now, without waiting for the next second's look (a reload of the
// agent's configuration), and returns what Err then returns.
func (w *WebConfig) Reload() error {
	w.mu.Lock()
	w.checked = time.Time{}
	w.mu.Unlock()
	w.current()
	return w.Err()
}

// Err is the error of the latest reload that failed (the last good configuration stays in
// force), or nil.
func (w *WebConfig) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// TLS reports whether the configuration serves TLS.
func (w *WebConfig) TLS() bool { return w.current().server != nil }

// MutualTLS reports whether the configuration verifies client certificates against a CA and so
// can make this node a member of a secure cluster.
func (w *WebConfig) MutualTLS() bool { return w.current().client != nil }

// ServerTLS returns the server side's tls.Config, nil when the file has no tls_server_config.
// Every handshake takes the configuration in force (GetConfigForClient), so certificate, key,
// client CA and versions follow the files.
func (w *WebConfig) ServerTLS() *tls.Config {
	if w.current().server == nil {
		return nil
	}
	base := w.current().server.Clone()
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		l := w.current()
		if l.server == nil {
			return nil, errors.New("TLS was removed from the web config; restart to serve plain HTTP")
		}
		c := l.server.Clone()
		c.NextProtos = base.NextProtos
		return c, nil
	}
	return base
}

// ClientTLS returns the node's client tls.Config towards its peers (its certificate, the
// cluster CA), nil when the configuration has no client CA. Each call takes the configuration
// in force.
func (w *WebConfig) ClientTLS() *tls.Config {
	c := w.current().client
	if c == nil {
		return nil
	}
	return c.Clone()
}

// headers returns the http_server_config headers to set on every answer.
func (w *WebConfig) headers() map[string]string { return w.current().cfg.HTTPConfig.Header }
