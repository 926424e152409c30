// Package rrddrpc serves the plugin half of xcp-rrdd's XML-RPC interface on a Unix socket, so
// that XAPI rrdd plugins written with XAPI's own libraries (Python rrdd.py, OCaml
// rrdd-plugin) run unmodified on a host without xcp-rrdd and write their files where the
// agent's rrddscan collector reads them.
//
// # Protocol
//
// Those libraries register before they write: rrdd.py asks Plugin.get_header,
// Plugin.get_path {uid}, then Plugin.register {uid, frequency} before every reading and
// Plugin.deregister {uid} at exit; the OCaml library asks Plugin.get_path and
// Plugin.Local.register {uid, info, protocol}, then Plugin.Local.deregister. Without an answer
// they never write: rrdd.py loops on "Failed to contact xcp-rrdd". The wire format is xapi-idl's
// (ocaml/xapi-idl/rrd/rrd_interface.ml): HTTP POST of an XML-RPC methodCall, any path (rrdd.py
// posts to "/", the OCaml client to the socket's path), named arguments in one struct param,
// unit as <nil/>; every answer is a methodResponse whose param is the struct
// {Status: "Success", Value: v} or {Status: "Failure", ErrorDescription: [tag, message]}.
//
// The Server answers as xcp-rrdd's rrdd_server.ml does:
//
//	Plugin.get_header                  "DATASOURCES\n"
//	Plugin.get_path {uid}              <Options.Dir>/<uid> (xcp-rrdd: /dev/shm/metrics/<uid>)
//	Plugin.register {uid, frequency}   registers with protocol V1 (kept for compatibility, as
//	                                   xcp-rrdd does); answers next_reading
//	Plugin.Local.register {uid, info, protocol}
//	                                   registers (protocol "V1" or "V2", default V2); answers
//	                                   next_reading
//	Plugin[.Local].next_reading {uid}  seconds (a double) until the agent next reads the
//	                                   directory; -1 when uid is not registered
//	Plugin[.Local].deregister {uid}    forgets uid (nil); its file is the plugin's to remove
//
// The frequency is "Five_Seconds", the only one xcp-rrdd knows. Plugin.Interdomain.* (Xen
// shared pages of other domains) and everything else answer Failure. Registration does not
// decide what the agent reads: rrddscan reads every file of the directory each scan, as
// registered or not; it tells plugins when to write.
//
// # Security
//
// XAPI plugins run as root and write where get_path says, so the socket is root's:
//
//   - It is created mode 0600 by the agent (root), and connections from any uid other than root
//     and the agent's own effective uid are closed at accept (SO_PEERCRED; Options.AllowUID).
//   - Its directory is made (0755) if missing; a directory that another user owns, or that
//     others may write to and is not sticky, is refused. A file already at the socket's path
//     is replaced only if it is a socket that nobody answers on (a stale one left by an agent
//     that died); a live socket (xcp-rrdd's own) or any other file is an error.
//   - Requests are bounded: Options.MaxConns connections at a time (the longest idle is closed
//     to make room, package connlimit), read and write deadlines (Options.Timeout), 8 KiB of
//     headers and Options.MaxRequestBytes of body, one request per connection; calls are
//     parsed with encoding/xml, no DTDs, limited in depth and number of values (ParseCall).
//   - get_path answers only paths in Options.Dir, named by a sanitized uid (CheckUID: no "/",
//     "..", NUL or control characters, not starting with ".", at most 64 bytes), and only while
//     the directory is one plugins may trust: reached without squatted components
//     (confined.OpenTrustedDir), the agent's own, and closed to others. It is made (0755) if
//     missing, at Listen and at get_path.
//   - Errors and logs never quote a request: they name the method and a byte offset, clip
//     element names to 32 bytes, and say what is wrong with a uid without repeating it.
//
// A Server is safe for concurrent use.
package rrddrpc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/confined"
	"github.com/cantal-go/cantal/internal/connlimit"
)

// DefaultPath is where XAPI's Python library (rrdd.py) connects; newer OCaml libraries use
// /var/lib/xcp/xcp-rrdd, which XenServer links to the same directory.
const DefaultPath = "/var/xapi/xcp-rrdd"

// Defaults of Options.
const (
	DefaultMaxRequestBytes = 64 << 10
	DefaultMaxConns        = 16
	DefaultMaxPlugins      = 256
	DefaultTimeout         = 10 * time.Second
	maxHeaderBytes         = 8 << 10
)

// Options configures a Server. Dir is required; the zero value of the rest is the default.
type Options struct {
	// Dir is the plugin directory (the agent's --rrdd-dir): get_path answers Dir/<uid>. It is
	// made absolute.
	Dir string
	// NextReading returns how long until the agent next reads Dir; nil: the next multiple of
	// five seconds of the wall clock (xcp-rrdd's own timeslice).
	NextReading func() time.Duration
	// MaxRequestBytes bounds a request's body; DefaultMaxRequestBytes when zero.
	MaxRequestBytes int64
	// MaxConns bounds the connections open at a time; DefaultMaxConns when zero.
	MaxConns int
	// MaxPlugins bounds the plugins registered at a time; DefaultMaxPlugins when zero.
	MaxPlugins int
	// Timeout is each connection's deadline to send its request and to take the answer;
	// DefaultTimeout when zero.
	Timeout time.Duration
	// AllowUID reports whether a peer with this uid may call; nil: root and the process's own
	// effective uid.
	AllowUID func(uid uint32) bool
	// Log receives registrations (info) and refused requests (debug); nil: discarded.
	Log *slog.Logger
}

// Plugin is a registered plugin.
type Plugin struct {
	UID       string
	Frequency string    // "Five_Seconds"
	Protocol  string    // "V1" or "V2"
	Since     time.Time // first registration
}

// Stats counts what a Server did since it was made.
type Stats struct {
	Calls         uint64 // calls answered, Success or Failure
	Failures      uint64 // calls answered Failure
	BadRequests   uint64 // requests refused before a call: not POST, too large, malformed
	RefusedPeers  uint64 // connections closed at accept: a peer uid AllowUID refuses
	Registrations uint64 // plugins newly registered
}

// Server serves the plugin RPC on one Unix socket. Make it with Listen.
type Server struct {
	opt  Options
	dir  string
	path string
	ln   *connlimit.Listener
	srv  *http.Server
	log  *slog.Logger

	mu      sync.Mutex
	plugins map[string]*Plugin

	closeOnce sync.Once
	closeErr  error

	calls, failures, badRequests, refusedPeers, registrations atomic.Uint64
}

// Listen makes the plugin directory if missing, binds the socket at path (see the package
// documentation for what it refuses and replaces) and returns a Server ready to Serve.
func Listen(path string, opt Options) (*Server, error) {
	if opt.Dir == "" {
		return nil, errors.New("no plugin directory to point plugins at")
	}
	dir, err := filepath.Abs(opt.Dir)
	if err != nil {
		return nil, err
	}
	if opt.MaxRequestBytes <= 0 {
		opt.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opt.MaxConns <= 0 {
		opt.MaxConns = DefaultMaxConns
	}
	if opt.MaxPlugins <= 0 {
		opt.MaxPlugins = DefaultMaxPlugins
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.AllowUID == nil {
		euid := uint32(os.Geteuid())
		opt.AllowUID = func(uid uint32) bool { return uid == 0 || uid == euid }
	}
	if opt.NextReading == nil {
		opt.NextReading = func() time.Duration {
			const slice = 5 * time.Second
			return slice - time.Duration(time.Now().UnixNano())%slice
		}
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	ul, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	s := &Server{opt: opt, dir: dir, path: path, log: log, plugins: map[string]*Plugin{}}
	s.ln = connlimit.New(&peerListener{UnixListener: ul, s: s}, opt.MaxConns)
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: opt.Timeout,
		ReadTimeout:       opt.Timeout,
		WriteTimeout:      opt.Timeout,
		IdleTimeout:       opt.Timeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         s.ln.ConnState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	// One request per connection, as both libraries connect for each call.
	s.srv.SetKeepAlivesEnabled(false)
	return s, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Dir returns the plugin directory, absolute.
func (s *Server) Dir() string { return s.dir }

// Serve answers calls until Close; it returns nil after Close.
func (s *Server) Serve() error {
	err := s.srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops the server, closes its connections and removes its socket. It may be called
// more than once, before or after Serve.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.srv.Close()
		// Serve may not have started: then the server does not know the listener yet.
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) && s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// Stats returns the Server's counters.
func (s *Server) Stats() Stats {
	return Stats{Calls: s.calls.Load(), Failures: s.failures.Load(), BadRequests: s.badRequests.Load(),
		RefusedPeers: s.refusedPeers.Load(), Registrations: s.registrations.Load()}
}

// ServeHTTP answers one XML-RPC call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.badRequests.Add(1)
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "XML-RPC calls are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxRequestBytes))
	if err != nil {
		s.badRequests.Add(1)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.log.Debug("rrdd plugin RPC: request too large", "limit", s.opt.MaxRequestBytes)
			http.Error(w, fmt.Sprintf("request body over %d bytes", s.opt.MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "request body unreadable", http.StatusBadRequest)
		return
	}
	call, err := ParseCall(body)
	if err != nil {
		s.badRequests.Add(1)
		s.log.Debug("rrdd plugin RPC: malformed call", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ok, v := s.dispatch(call)
	s.calls.Add(1)
	if !ok {
		s.failures.Add(1)
		s.log.Debug("rrdd plugin RPC: call failed", "method", clip(call.Method), "error", v)
	}
	out := appendResponse(nil, ok, v)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
}

// peerListener closes, at accept, connections from peers AllowUID refuses.
type peerListener struct {
	*net.UnixListener
	s *Server
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && l.s.opt.AllowUID(uid) {
			return c, nil
		}
		l.s.refusedPeers.Add(1)
		if err != nil {
			l.s.log.Debug("rrdd plugin RPC: peer credentials unknown; connection closed", "err", err)
		} else {
			l.s.log.Debug("rrdd plugin RPC: peer not allowed; connection closed", "uid", uid)
		}
		c.Close()
	}
}

// peerUID returns the uid of the process at the other end of c (SO_PEERCRED: its effective
// uid when it connected).
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return cred.Uid, nil
}

// listenUnix binds a Unix socket at path, mode 0600, in a directory made if missing and
// refused if others could swap entries in it; a stale socket in the way is replaced.
func listenUnix(path string) (*net.UnixListener, error) {
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(parent, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: parent, Err: err}
	}
	if euid := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != euid {
		return nil, fmt.Errorf("%s: refused: the socket's directory is uid %d's", parent, st.Uid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return nil, fmt.Errorf("%s: refused: others may write to the socket's directory and it is not sticky", parent)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket: not replaced", path)
	default:
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another server (xcp-rrdd?) answers on it", path)
		}
		if !errors.Is(err, unix.ECONNREFUSED) {
			return nil, fmt.Errorf("%s: cannot tell whether the socket is stale: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Until this chmod the socket has the umask's mode; peerListener refuses other users'
	// connections made meanwhile.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// ensureDir makes dir (0755, with missing parents 0755 under the umask) if it does not exist,
// then checks plugins may trust it (trustedDir).
func ensureDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err == nil {
		// Mkdir's mode is masked by the umask: set 0755 on the directory just made, through
		// a descriptor that is not a symlink's.
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: dir, Err: err}
		}
		err = unix.Fchmod(fd, 0o755)
		unix.Close(fd)
		if err != nil {
			return &os.PathError{Op: "chmod", Path: dir, Err: err}
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	return trustedDir(dir)
}

// trustedDir reports why plugins, as root, should not write in dir: a component of its path
// squatted (confined.OpenTrustedDir), or dir itself another user's or open to others' writes
// (they could put a symlink where a plugin's file goes).
func trustedDir(dir string) error {
	d, err := confined.OpenTrustedDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	st := d.Stat()
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("%s: refused: the directory is uid %d's, not the agent's", dir, st.Uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: refused: others may write to the directory", dir)
	}
	return nil
}
