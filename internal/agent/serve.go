package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/cantalv1"
	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/connlimit"
	"github.com/cantal-go/cantal/internal/logbudget"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/sdnotify"
)

// The agent's network face: its listeners (TCP, TLS from --web-config, Unix sockets), the
// bounds on connections, and the handler chain every request passes through:
//
//	closeUnread → deadlines → guard (who calls, which role the route needs) → readBodies →
//	admit → limitQueries → routes
//
// so that a request is authenticated before anything is read for it, its body is read in full
// before it takes a query slot, a refusal closes the connection rather than wait for a body,
// and no silent or slow client holds a connection or a slot (docs/security.md, "Connections").

// listenAddrs splits --listen into its addresses.
func listenAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// boundListener is one listener of the HTTP server.
type boundListener struct {
	addr string // as given to --listen
	unix bool
	cl   *connlimit.Listener
	ln   net.Listener // what the server serves: cl, or TLS over it
}

// maxConnections is --max-connections, or by default half the descriptor limit (as Netdata
// does: the other half is the scans'), at most 4096.
func maxConnections(cfg Config) int {
	if cfg.MaxConnections > 0 {
		return cfg.MaxConnections
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 512
	}
	return int(min(rl.Cur/2, 4096))
}

// connLimits are the figures of the connection policy (package connlimit; docs/security.md),
// from --max-connections (M), --max-connections-per-source and --max-websockets.
type connLimits struct {
	http       connlimit.Options // each HTTP listener: M, an eighth of it kept for trusted callers
	streams    connlimit.Options // the gossip TCP and statsd TCP listeners: M/4 each
	websockets int               // default M/16
}

func limitsOf(cfg Config) connLimits {
	m := maxConnections(cfg)
	per := cfg.MaxConnsPerSrc
	if per == 0 {
		per = max(m/8, 1)
	}
	ws := cfg.MaxWebSockets
	if ws == 0 {
		ws = max(m/16, 1)
	}
	return connLimits{
		http:       connlimit.Options{Max: m, PerSource: per, Admission: true, Reserve: m / 8},
		streams:    connlimit.Options{Max: max(m/4, 1), PerSource: per},
		websockets: ws,
	}
}

// openWeb loads --web-config and checks that the agent's settings can be served safely with it.
func (a *Agent) openWeb() error {
	if a.cfg.WebConfig == "" {
		for _, addr := range listenAddrs(a.cfg.Listen) {
			if !strings.HasPrefix(addr, "unix:") && !loopbackAddr(addr) {
				a.log.Warn("serving without --web-config on a network address: anyone who reaches it reads every series, and only loopback clients may write", "addr", addr)
			}
		}
		return nil
	}
	w, err := loadWeb(a.cfg)
	if err != nil {
		return err
	}
	a.web = w
	return nil
}

// loadWeb loads cfg's --web-config (set) and checks that cfg can be served safely with it; a
// reload checks the file again with it.
func loadWeb(cfg Config) (*access.WebConfig, error) {
	w, err := access.LoadWebConfig(cfg.WebConfig)
	if err != nil {
		return nil, err
	}
	if !w.TLS() {
		for _, addr := range listenAddrs(cfg.Listen) {
			if !strings.HasPrefix(addr, "unix:") && !loopbackAddr(addr) {
				return nil, fmt.Errorf("--web-config %s has no tls_server_config: credentials would cross the network in clear on %s", cfg.WebConfig, addr)
			}
		}
	}
	if cfg.ClusterName != "" {
		if !w.MutualTLS() {
			return nil, fmt.Errorf("--cluster-name with --web-config needs mutual TLS between peers: set tls_server_config's client_ca_file (the cluster CA) and client_auth_type RequireAndVerifyClientCert or VerifyClientCertIfGiven")
		}
		if cfg.GossipKey == "" {
			return nil, fmt.Errorf("--cluster-name with --web-config needs --gossip-key: gossip packets are not covered by TLS")
		}
	}
	return w, nil
}

func loopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// listen binds every --listen address. A Unix socket is made connectable by every local user
// (mode 0666): each is served only what the guard lets its uid see. A stale socket left by an
// agent that died is replaced; any other file in the way is an error.
func (a *Agent) listen() error {
	lim := limitsOf(a.cfg).http
	var stls *tls.Config
	if a.web != nil && a.web.TLS() {
		stls = a.web.ServerTLS()
		// HTTP/1.1 only: the WebSocket and gossip streams are HTTP/1.1 upgrades.
		stls.NextProtos = []string{"http/1.1"}
	}
	for _, addr := range listenAddrs(a.cfg.Listen) {
		var ln net.Listener
		var err error
		path, isUnix := strings.CutPrefix(addr, "unix:")
		if isUnix {
			if fi, serr := os.Lstat(path); serr == nil && fi.Mode()&os.ModeSocket != 0 {
				os.Remove(path)
			}
			ln, err = net.Listen("unix", path)
			if err == nil {
				err = os.Chmod(path, 0o666)
			}
		} else {
			ln, err = net.Listen("tcp", addr)
		}
		if err != nil {
			if ln != nil {
				ln.Close()
			}
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		b := boundListener{addr: addr, unix: isUnix, cl: connlimit.NewWith(ln, lim)}
		b.ln = b.cl
		if stls != nil && !isUnix {
			b.ln = tls.NewListener(b.cl, stls)
		}
		a.listeners = append(a.listeners, b)
	}
	if len(a.listeners) == 0 {
		return errors.New("--listen gives no address")
	}
	return nil
}

// tcpAddr is the first TCP listener's address: the agent's HTTP address for its peers; nil
// when the agent listens on Unix sockets only.
func (a *Agent) tcpAddr() net.Addr {
	for _, b := range a.listeners {
		if !b.unix {
			return b.cl.Addr()
		}
	}
	return nil
}

// needRole is the role a request needs: a cluster member's certificate for gossip streams,
// write for anything that is not a read (ingest, joining peers) and for pprof, read otherwise.
func needRole(r *http.Request) access.Role {
	switch {
	case r.URL.Path == cluster.GossipPath:
		return access.Member
	case strings.HasPrefix(r.URL.Path, "/debug/pprof"):
		return access.Write
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions:
		return access.Read
	case cantalv1.ReadOnlyPost(r): // the original API's POST /query only reads
		return access.Read
	case promapi.ReadOnlyPost(r): // Prometheus's API takes queries as POSTed forms (Grafana)
		return access.Read
	default:
		return access.Write
	}
}

// handler is the chain every request passes through (see the top of this file).
func (a *Agent) handler() http.Handler {
	private := a.cfg.PrivateProcesses == "on"
	if a.cfg.PrivateProcesses == "auto" {
		hidden, err := access.HidePID(a.cfg.Proc)
		if err != nil {
			a.log.Warn("cannot tell whether /proc hides processes; serving them as if it did not", "err", err)
		}
		private = hidden
	}
	a.privateProcesses = private
	g := &access.Guard{
		Web:              a.web,
		Writers:          a.cfg.WriteUsers,
		Readers:          a.cfg.ReadUsers,
		LocalNames:       localNames(a.cfg.NodeName),
		PrivateProcesses: private,
		Need:             needRole,
		Log:              a.log.With("subsystem", "access"),
	}
	if a.gossip != nil {
		c := a.gossip.c
		g.IsMember = func(r *http.Request) bool {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			return err == nil && c.IsLiveMemberIP(net.ParseIP(host))
		}
	}
	return closeUnread(deadlines(g.Handler(a.bodies.readBodies(admit(g.IsMember, limitQueries(a.mux, a.queries))))))
}

// takesBody reports whether r's route takes a request body: the ingest routes, adding a peer,
// and the original Cantal API's query and add_host (package cantalv1). Any other request that
// announces a body is refused without reading it (finding N10: GETs with bodies used to take
// the shared body budget from the pushes).
func takesBody(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	switch r.URL.Path {
	case "/write", "/api/v2/write", "/v1/metrics", "/api/v1/peers":
		return true
	}
	return cantalv1.TakesBody(r)
}

// closeUnread is the outermost handler. A request that announces a body is answered with
// "Connection: close" until its body has been read in full (admit takes the header away
// again), and its connection stops reading once the handler returns: a refusal written before
// the body (401, 403, 413, 503) goes out at once and the connection closes, instead of net/http
// waiting for a body the client may never send before it writes the answer (finding N1). A
// body on a route that takes none is refused unread, without charging the body budget (N10).
func closeUnread(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Connection", "close")
		defer func() {
			if h.Get("Connection") == "close" {
				// net/http would read up to 256 KiB of what is left of the body after the
				// answer; the connection closes anyway.
				http.NewResponseController(w).SetReadDeadline(time.Now())
			}
		}()
		if !takesBody(r) {
			api.Error(w, http.StatusBadRequest, "this route takes no request body")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admit runs once a request is authenticated and its body read: its connection counts as busy
// from now on (package connlimit evicts only connections that are idle or slow to send their
// headers or body). Anonymous callers, but for a live member's address, hold at most the
// listener's cap less its reserve of busy connections; past that they are answered 503 and the
// connection closed, so that an authenticated client or a peer always gets in.
func admit(isMember func(*http.Request) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Del("Connection") // the body is read: the connection may be kept
		c, _ := access.FromContext(r.Context())
		trusted := c.Via != "anonymous" || (isMember != nil && isMember(r))
		if !connlimit.Admit(r.Context(), trusted) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			api.Error(w, http.StatusServiceUnavailable, "busy: the connections anonymous callers may hold are taken; retry")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Bodies: each at most maxBody (as the ingest's own limit of a compressed body), all together at
// most maxBodies in memory.
const (
	maxBody   = 32 << 20
	maxBodies = 64 << 20
)

// server builds the HTTP server of every listener.
func (a *Agent) server() *http.Server {
	return &http.Server{
		Handler: a.handler(),
		// A short deadline before authentication: the headers (and a TLS handshake) within
		// headerTimeout; the body, read only once the caller is known, within bodyTimeout.
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return connlimit.ConnContext(access.ConnContext(ctx, c), c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			for _, b := range a.listeners {
				b.cl.ConnState(c, st)
			}
		},
		// Failed TLS handshakes and malformed requests: anyone can cause them, so within a
		// log budget.
		ErrorLog: logbudget.ErrorLog(a.log, logbudget.New(a.log, "HTTP server errors"), slog.LevelDebug),
	}
}

// headerTimeout bounds the wait for a request's headers, the TLS handshake included.
const headerTimeout = 5 * time.Second

// serve serves every listener until the server is shut down or one listener fails.
func (a *Agent) serve(srv *http.Server) error {
	errc := make(chan error, len(a.listeners))
	for _, b := range a.listeners {
		scheme := "http"
		if b.ln != b.cl {
			scheme = "https"
		}
		a.log.Info("serving", "addr", b.cl.Addr().String(), "scheme", scheme, "node", a.cfg.NodeName, "id", a.nodeID, "max_connections", b.cl.Stats().Max)
		go func() { errc <- srv.Serve(b.ln) }()
	}
	// The listeners were bound in New: the API answers now. Type=notify units start here.
	if _, err := sdnotify.Notify(os.Getenv("NOTIFY_SOCKET"), sdnotify.Ready); err != nil {
		a.log.Warn("cannot tell the service manager the agent is ready", "err", err)
	}
	var first error
	for range a.listeners {
		err := <-errc
		if !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = fmt.Errorf("http: %w", err)
			srv.Close()
		}
	}
	return first
}

// localNames are the names of this machine a loopback request may carry: its host name (and
// its first label) and the node name.
func localNames(node string) []string {
	names := []string{node}
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
		if short, _, ok := strings.Cut(h, "."); ok {
			names = append(names, short)
		}
	}
	return names
}
