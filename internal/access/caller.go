// Package access decides who is calling the agent and what the caller may do.
//
// The agent runs as root and listens on networks; every request passes through a Guard before
// any handler runs. The Guard establishes a Caller — from a verified TLS client certificate,
// HTTP basic auth checked against the bcrypt hashes of an exporter-toolkit web config, the
// SO_PEERCRED credentials of a Unix socket peer, or nothing (an anonymous TCP client when no web
// config is set) — gives it Roles, and refuses a request whose route needs a role the caller
// lacks: 401 for no valid credential, 403 for a credential without the role.
//
// Roles:
//   - Read: every GET of the API, the exports, the UI and the WebSocket.
//   - Write: what changes what the agent holds: /write, /api/v2/write, OTLP, POST /api/v1/peers,
//     and /debug/pprof (it reveals the agent's own memory and command line).
//   - Member: a cluster member's gossip stream. Only a verified client certificate (mutual TLS)
//     is a member when a web config is set.
//
// Which processes a caller may see is its Processes: all of them, only those of its own uid (a
// local caller on the Unix socket while /proc hides other users' processes), or none (an
// anonymous network caller under the same privacy), so that nobody reads through the agent what
// /proc mounted hidepid hides from them.
//
// Handlers read the Caller with FromContext. Everything here is safe for concurrent use.
package access

import (
	"context"
	"strings"
)

// Role is a set of permissions.
type Role uint8

// The roles; a Caller holds a union of them.
const (
	Read Role = 1 << iota
	Write
	Member
)

func (r Role) String() string {
	var parts []string
	for _, x := range []struct {
		r Role
		s string
	}{{Read, "read"}, {Write, "write"}, {Member, "member"}} {
		if r&x.r != 0 {
			parts = append(parts, x.s)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// ProcessAccess says which processes a caller may see details of (rows of /api/v1/processes and
// series carrying a pid label).
type ProcessAccess uint8

const (
	// ProcessesAll: every process.
	ProcessesAll ProcessAccess = iota
	// ProcessesOwn: only the processes of the caller's own uid (Caller.UID).
	ProcessesOwn
	// ProcessesNone: none; the answer leaves per-process rows and series out.
	ProcessesNone
)

func (p ProcessAccess) String() string {
	switch p {
	case ProcessesAll:
		return "all"
	case ProcessesOwn:
		return "own"
	default:
		return "none"
	}
}

// Caller is who made a request and what it may do. The zero Caller has no role.
type Caller struct {
	// Name identifies the caller in logs: a basic-auth user name, a client certificate's common
	// name, "uid:N" on the Unix socket, or "" for an anonymous network client.
	Name string
	// Via is how the caller was identified: "cert", "basic", "unix" or "anonymous".
	Via string
	// Roles are what the caller may do.
	Roles Role
	// Unix is true for a caller on the Unix socket; UID and GID are then its credentials.
	// Without a web config, a TCP caller whose socket is on this host has its owner's UID too
	// (Name "uid:N (tcp)"; see peertcp.go).
	Unix     bool
	UID, GID uint32
	// Processes is which processes the caller may see.
	Processes ProcessAccess
	// Details is whose private details the caller may see among the processes it sees: the
	// io counters (/proc/PID/io) and what comes from the environment (/proc/PID/environ: the
	// application's name and series, found through CANTAL_PATH), which /proc shows only to the
	// process's owner and root, hidepid or not (issue 31, N13). ProcessesOwn for a local
	// caller other than root (on the Unix socket, or over TCP from a socket of this host
	// without a web config); ProcessesNone for a TCP caller the kernel could not be asked
	// about; ProcessesAll (the zero value) for every other caller.
	Details ProcessAccess
}

// SeesDetails reports whether the caller may see the private details (Details) of a process
// owned by uid.
func (c Caller) SeesDetails(uid uint32) bool { return c.Details.allows(uid, c.UID) }

// Has reports whether the caller holds every role in r.
func (c Caller) Has(r Role) bool { return c.Roles&r == r }

// SeesProcess reports whether the caller may see the details of a process owned by uid.
func (c Caller) SeesProcess(uid uint32) bool { return c.Processes.allows(uid, c.UID) }

// allows reports whether p lets a caller of uid self see a process owned by uid.
func (p ProcessAccess) allows(uid, self uint32) bool {
	switch p {
	case ProcessesAll:
		return true
	case ProcessesOwn:
		return uid == self
	default:
		return false
	}
}

type ctxKey struct{}

// NewContext returns ctx carrying c.
func NewContext(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the Caller the Guard put in ctx. Without one (a handler called outside
// the Guard, as in tests of a single package) it returns a caller with every role who sees
// every process, and ok false.
func FromContext(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(ctxKey{}).(Caller)
	if !ok {
		return Caller{Via: "internal", Roles: Read | Write | Member, Processes: ProcessesAll}, false
	}
	return c, true
}
