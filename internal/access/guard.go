package access

import (
	"crypto/sha256"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cantal-go/cantal/internal/logbudget"
	"golang.org/x/crypto/bcrypt"
)

// Guard authenticates every request and refuses those whose route needs a role the caller
// lacks. Fields are set before Handler is called and not changed after.
type Guard struct {
	// Web is the --web-config; nil means no authentication: network clients are anonymous.
	Web *WebConfig
	// Writers are the names (basic-auth users, client certificates' common names) that hold
	// Write besides Read. Without a web config, writes are taken from loopback and the Unix
	// socket only.
	Writers []string
	// Readers are client certificates' common names that read wherever they connect from (an
	// operator's or a Prometheus's certificate); in a cluster, other certificates of the CA
	// read only from a live member's address (see IsMember). Basic-auth users always read.
	Readers []string
	// PrivateProcesses hides other users' processes: set when /proc is mounted hidepid (see
	// HidePID) or by the operator. A Unix socket caller then sees its own processes (root
	// all), an anonymous network caller none; an authenticated caller of the web config sees
	// every process, being an identity the operator granted.
	PrivateProcesses bool
	// LocalNames are host names of this machine (its host name, the node name) that a request
	// to a loopback address may use besides localhost and IP addresses (see reboundHost).
	LocalNames []string
	// IsMember, when set (a cluster), tells whether a request comes from a live member of the
	// cluster. A verified client certificate then reads only from a member: the certificate
	// alone (a node holding one but not the gossip key) opens the gossip stream, where
	// memberlist's encryption refuses it, and nothing else. Names in Writers read and write
	// wherever they connect from.
	IsMember func(r *http.Request) bool
	// Need says which role a request needs.
	Need func(r *http.Request) Role
	// Log receives refusals, within a log budget (package logbudget), so a scan of the port
	// cannot flood the log.
	Log *slog.Logger

	once    sync.Once
	writers map[string]bool
	readers map[string]bool
	logLim  *logbudget.Limiter

	authMu sync.Mutex // serialises bcrypt: one CPU at most for password checks
	cache  authCache
}

// Handler returns next behind the guard.
func (g *Guard) Handler(next http.Handler) http.Handler {
	g.once.Do(func() {
		g.writers = make(map[string]bool, len(g.Writers))
		for _, w := range g.Writers {
			g.writers[w] = true
		}
		g.readers = make(map[string]bool, len(g.Readers))
		for _, r := range g.Readers {
			g.readers[r] = true
		}
		if g.Log == nil {
			g.Log = slog.Default()
		}
		g.logLim = logbudget.New(g.Log, "refusals")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Web != nil {
			for k, v := range g.Web.headers() {
				w.Header().Set(k, v)
			}
		}
		if g.Web == nil && reboundHost(r, g.LocalNames) {
			// Without credentials, the host name is what keeps a web page from reading a
			// loopback agent: a page whose name was re-pointed at 127.0.0.1 (DNS rebinding) is
			// same-origin with it for the browser.
			g.refused(r, "host name not of a loopback address")
			writeError(w, http.StatusForbidden, "forbidden: on a loopback address without --web-config, ask for localhost or an IP address")
			return
		}
		c, ok := g.identify(r)
		if !ok {
			g.refused(r, "no valid credential")
			w.Header().Set("WWW-Authenticate", `Basic realm="cantal", charset="UTF-8"`)
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		need := Read
		if g.Need != nil {
			need = g.Need(r)
		}
		if need&Write != 0 && crossOrigin(r) {
			// A browser that holds the user's basic-auth credentials sends them with a form
			// another site posts here; writes come from the agent's own pages or from tools,
			// which send no Origin.
			g.refused(r, "cross-origin write")
			writeError(w, http.StatusForbidden, "forbidden: cross-origin write")
			return
		}
		if !c.Has(need) {
			g.refused(r, "caller "+c.Name+" ("+c.Via+") lacks role "+need.String())
			writeError(w, http.StatusForbidden, "forbidden: this route needs the "+need.String()+" role")
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), c)))
	})
}

// identify establishes the caller of r; ok is false when a web config is set and r carries no
// valid credential.
func (g *Guard) identify(r *http.Request) (Caller, bool) {
	if cred, isUnix := PeerCredFromContext(r.Context()); isUnix {
		c := Caller{Name: "uid:" + itoa(cred.UID), Via: "unix", Unix: true, UID: cred.UID, GID: cred.GID, Roles: Read, Processes: ProcessesAll}
		if cred.UID == 0 || g.Web == nil {
			c.Roles |= Write
		}
		if g.PrivateProcesses && cred.UID != 0 {
			c.Processes = ProcessesOwn
		}
		if cred.UID != 0 {
			c.Details = ProcessesOwn // as /proc/PID/io and environ, hidepid or not (N13)
		}
		return c, true
	}
	if g.Web == nil {
		c := Caller{Via: "anonymous", Roles: Read | Member, Processes: ProcessesAll}
		if isLoopback(r.RemoteAddr) {
			c.Roles |= Write
		}
		// A TCP caller on this host is the local user owning its socket, seen with the Unix
		// socket's rules: root every process, another user its own processes' private
		// details (and, under private processes, only its own processes) (N13). A caller
		// from elsewhere is anonymous; one the kernel could not be asked about is taken for
		// another user: no private details, no process under private processes.
		switch uid, local, known, err := peerUID(r.Context()); {
		case known && err != nil:
			c.Details = ProcessesNone
			if g.PrivateProcesses {
				c.Processes = ProcessesNone
			}
		case local && uid != 0:
			c.Name, c.UID = "uid:"+itoa(uid)+" (tcp)", uid
			c.Details = ProcessesOwn
			if g.PrivateProcesses {
				c.Processes = ProcessesOwn
			}
		case local: // root
			c.Name = "uid:0 (tcp)"
		case g.PrivateProcesses:
			c.Processes = ProcessesNone
		}
		return c, true
	}
	// A verified client certificate: a cluster member (the client CA is the cluster's).
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		leaf := r.TLS.VerifiedChains[0][0]
		name := certName(leaf)
		c := Caller{Name: name, Via: "cert", Roles: Member, Processes: ProcessesAll}
		if g.IsMember == nil || g.readers[name] || g.IsMember(r) {
			c.Roles |= Read
		}
		if g.writers[name] {
			c.Roles |= Read | Write
		}
		return c, true
	}
	user, pass, ok := r.BasicAuth()
	if !ok || !g.checkPassword(user, pass) {
		return Caller{}, false
	}
	c := Caller{Name: user, Via: "basic", Roles: Read, Processes: ProcessesAll}
	if g.writers[user] {
		c.Roles |= Write
	}
	return c, true
}

func certName(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return c.SerialNumber.String()
}

// dummyHash is a bcrypt hash checked for unknown users, so that timing does not tell which user
// names exist.
const dummyHash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

// checkPassword compares pass with user's bcrypt hash. A success is remembered (keyed by a
// SHA-256 of user, hash and password) so a dashboard's requests cost one bcrypt, not one each;
// failures are not, and bcrypt runs one at a time, so wrong passwords cost at most one CPU.
func (g *Guard) checkPassword(user, pass string) bool {
	users := g.Web.current().cfg.Users
	hash, known := users[user]
	h := string(hash)
	if !known {
		h = dummyHash
	}
	key := sha256.Sum256([]byte(user + "\x00" + h + "\x00" + pass))
	if known && g.cache.ok(key) {
		return true
	}
	g.authMu.Lock()
	err := bcrypt.CompareHashAndPassword([]byte(h), []byte(pass))
	g.authMu.Unlock()
	if err != nil || !known {
		return false
	}
	g.cache.add(key)
	return true
}

// authCache remembers successful password checks; it holds at most authCacheMax keys and is
// emptied when full (a new bcrypt per user then, no more).
type authCache struct {
	mu sync.Mutex
	m  map[[32]byte]struct{}
}

const authCacheMax = 1024

func (c *authCache) ok(k [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[k]
	return ok
}

func (c *authCache) add(k [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= authCacheMax {
		c.m = make(map[[32]byte]struct{})
	}
	c.m[k] = struct{}{}
}

// refused logs a refusal within the log budget.
func (g *Guard) refused(r *http.Request, why string) {
	if g.logLim.Allow() {
		g.Log.Info("request refused", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "why", why)
	}
}

// reboundHost reports whether r came to a loopback address of the server with a Host that is
// neither an IP address, localhost nor one of the machine's own names: what a DNS-rebinding
// page sends.
func reboundHost(r *http.Request, local []string) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := la.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	for _, n := range local {
		if strings.EqualFold(host, n) {
			return false
		}
	}
	return net.ParseIP(strings.Trim(host, "[]")) == nil
}

// crossOrigin reports whether r carries an Origin header naming another host than r's own.
func crossOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || !strings.EqualFold(u.Host, r.Host)
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write([]byte(`{"error":"` + msg + `"}` + "\n"))
}

func itoa(u uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}
