// Package cantalv1 serves the HTTP API of the original Cantal agent (tailhook/cantal, the Rust
// "v1" agent) next to this agent's own /api/v1: GET /status, /all_processes, /all_sockets,
// /all_metrics, /all_peers, /peers_with_remote (with the original's .json, .cbor and .gron
// suffixes), POST /add_host and POST /query with the original's JSON query language, each
// answering in the original's schema, so that a resource manager written for Cantal polls this
// agent unchanged.
//
// The data is this agent's: the registry's latest View and its history store, the process table
// and the cluster membership, with metric keys mapped to the original's (keys.go; the table is in
// docs/original-api.md). Every answer holds only what the request's caller may see: series
// through Server.Visible (api.Server.SeriesVisible), processes through Server.Processes.
//
// A Server is safe for concurrent use; its fields are set before Register and not changed after.
package cantalv1

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// Process is one row of /all_processes as this agent knows it; the Server turns it into the
// original's MinimalProcess.
type Process struct {
	PID, PPID, UID int
	Name           string
	Cmdline        []string
	State          string // one letter as in ps
	StartTime      int64  // unix ms
	Threads        int
	CPUUser        float64 // seconds
	CPUSystem      float64 // seconds
	RSS, VSZ, Swap uint64
	ReadBytes      uint64
	WriteBytes     uint64
	Cgroup         string // "" for the root cgroup
}

// Status is what /status reports about the agent.
type Status struct {
	Version      string
	Started      time.Time
	ScanDuration time.Duration // of the last scan
	BootTime     int64         // unix seconds; 0 when unknown
	NumPeers     int           // peers known, alive or not
	NumStale     int           // of those, the ones not answering (suspect or dead)
	LastScan     int64         // unix ms of the latest scan
	HistoryBytes int64         // what the history holds in memory
	Threads      int           // OS threads of the agent
	HeapBytes    uint64
}

// Peer is one cluster member as /all_peers reports it.
type Peer struct {
	ID       string
	Name     string
	Addr     string // gossip host:port
	HTTP     string // its HTTP host:port
	Alive    bool   // answering probes
	Failing  bool   // suspect or dead
	RTT      time.Duration
	LastSeen time.Time
	Since    time.Time
}

// Server answers the original's routes. Fields are set before Register.
type Server struct {
	Registry *registry.Registry
	// Visible returns the predicate of the series the caller in ctx may see, nil for every
	// series (api.Server.SeriesVisible).
	Visible func(ctx context.Context) func(series.Labels) bool
	// Processes returns the processes the caller in ctx may see, command lines redacted as
	// /api/v1/processes redacts them.
	Processes func(ctx context.Context) []Process
	// Status reports the agent for /status.
	Status func(ctx context.Context) Status
	// Peers returns the cluster members; nil when gossip is off.
	Peers func() []Peer
	// Join adds a peer by its gossip address (as POST /api/v1/peers); nil when gossip is off.
	Join func(addr string) error
	// Limits bound /query; the zero value means DefaultLimits.
	Limits Limits
}

// Format is the encoding a route's suffix asks for.
type Format int

// The suffixes of the original's routes: none and .json give JSON.
const (
	JSON Format = iota
	CBOR
	Gron
)

var suffixes = [...]struct {
	s string
	f Format
}{{"", JSON}, {".json", JSON}, {".cbor", CBOR}, {".gron", Gron}}

// Paths lists every path Register serves.
func Paths() []string {
	var out []string
	for _, base := range []string{"/status", "/all_processes", "/all_sockets", "/all_metrics", "/all_peers", "/peers_with_remote", "/add_host", "/query"} {
		for _, s := range suffixes {
			out = append(out, base+s.s)
		}
	}
	return out
}

// ReadOnlyPost reports whether r is a POST that only reads (POST /query and its suffixes): it
// needs the read role, not the write role other POSTs need.
func ReadOnlyPost(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	p := r.URL.Path
	for _, s := range suffixes {
		if p == "/query"+s.s {
			return true
		}
	}
	return false
}

// TakesBody reports whether r is a POST to a route of this package that reads a request body
// (/query and /add_host, with their suffixes), for the agent's rule that only such routes take
// one.
func TakesBody(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	for _, base := range []string{"/query", "/add_host"} {
		for _, s := range suffixes {
			if r.URL.Path == base+s.s {
				return true
			}
		}
	}
	return false
}

// Register adds the original's routes to mux as exact paths, so they win over a "/" fallback.
func (s *Server) Register(mux *http.ServeMux) {
	get := func(base string, h func(w http.ResponseWriter, r *http.Request, f Format)) {
		for _, sf := range suffixes {
			f := sf.f
			handle(mux, base+sf.s, "GET", func(w http.ResponseWriter, r *http.Request) { h(w, r, f) })
		}
	}
	get("/status", s.status)
	get("/all_processes", s.allProcesses)
	get("/all_sockets", s.allSockets)
	get("/all_metrics", s.allMetrics)
	get("/all_peers", func(w http.ResponseWriter, r *http.Request, f Format) { s.peers(w, r, f, false) })
	get("/peers_with_remote", func(w http.ResponseWriter, r *http.Request, f Format) { s.peers(w, r, f, true) })
	for _, sf := range suffixes {
		f := sf.f
		handle(mux, "/add_host"+sf.s, "POST", func(w http.ResponseWriter, r *http.Request) { s.addHost(w, r, f) })
		handle(mux, "/query"+sf.s, "POST", s.query)
	}
}

// handle registers path answering method (and HEAD for GET), with a JSON 405 otherwise.
func handle(mux *http.ServeMux, path, method string, h http.HandlerFunc) {
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, path))
			return
		}
		h(w, r)
	})
}

func writeError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(apiwire.ErrorAnswer{Error: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// respond writes v in format f: JSON, CBOR (fxamacker/cbor of the same value) or gron.
func respond(w http.ResponseWriter, f Format, v any) {
	var b []byte
	var err error
	ctype := "application/json"
	switch f {
	case JSON:
		b, err = json.Marshal(v)
	case CBOR:
		ctype = "application/cbor"
		b, err = marshalCBOR(v)
	case Gron:
		ctype = "text/x-gron"
		b, err = gron(v)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// statusData is the original's StatusData.
type statusData struct {
	Version       string         `json:"version" cbor:"version"`
	StartupTime   uint64         `json:"startup_time" cbor:"startup_time"`   // unix ms
	ScanDuration  uint32         `json:"scan_duration" cbor:"scan_duration"` // ms
	Storage       storageStats   `json:"storage" cbor:"storage"`
	BootTime      *uint64        `json:"boot_time" cbor:"boot_time"` // unix s
	SelfReport    map[string]any `json:"self_report" cbor:"self_report"`
	ThreadsReport map[string]any `json:"threads_report" cbor:"threads_report"`
	NumPeers      int64          `json:"num_peers" cbor:"num_peers"`
	NumStale      int64          `json:"num_stale" cbor:"num_stale"`
}

// storageStats is the original's StorageStats: its last write of the history to disk. This
// agent keeps the history in memory and snapshots it, so time and timestamp are the latest
// scan's and size what the history holds.
type storageStats struct {
	Time      uint64 `json:"time" cbor:"time"`
	Timestamp uint64 `json:"timestamp" cbor:"timestamp"`
	Duration  uint32 `json:"duration" cbor:"duration"`
	Size      uint64 `json:"size" cbor:"size"`
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, f Format) {
	st := s.Status(r.Context())
	d := statusData{
		Version:      st.Version,
		StartupTime:  uint64(max(st.Started.UnixMilli(), 0)),
		ScanDuration: uint32(min(st.ScanDuration.Milliseconds(), 1<<31)),
		Storage:      storageStats{Time: uint64(max(st.LastScan, 0)), Timestamp: uint64(max(st.LastScan, 0)), Size: uint64(max(st.HistoryBytes, 0))},
		SelfReport: map[string]any{
			"uptime_ms":  time.Since(st.Started).Milliseconds(),
			"threads":    st.Threads,
			"heap_bytes": st.HeapBytes,
		},
		ThreadsReport: map[string]any{},
		NumPeers:      int64(st.NumPeers),
		NumStale:      int64(st.NumStale),
	}
	if st.BootTime > 0 {
		bt := uint64(st.BootTime)
		d.BootTime = &bt
	}
	respond(w, f, d)
}

// minimalProcess is the original's MinimalProcess.
type minimalProcess struct {
	PID             uint32  `json:"pid" cbor:"pid"`
	PPID            uint32  `json:"ppid" cbor:"ppid"`
	UID             uint32  `json:"uid" cbor:"uid"`
	GID             uint32  `json:"gid" cbor:"gid"`
	Name            string  `json:"name" cbor:"name"`
	State           string  `json:"state" cbor:"state"` // one character
	VSize           uint64  `json:"vsize" cbor:"vsize"`
	RSS             uint64  `json:"rss" cbor:"rss"`
	Swap            uint64  `json:"swap" cbor:"swap"`
	NumThreads      uint32  `json:"num_threads" cbor:"num_threads"`
	StartTime       uint64  `json:"start_time" cbor:"start_time"` // clock ticks after boot
	StartTimestamp  uint64  `json:"start_timestamp" cbor:"start_timestamp"`
	UserTime        uint32  `json:"user_time" cbor:"user_time"` // clock ticks
	SystemTime      uint32  `json:"system_time" cbor:"system_time"`
	ChildUserTime   uint32  `json:"child_user_time" cbor:"child_user_time"`
	ChildSystemTime uint32  `json:"child_system_time" cbor:"child_system_time"`
	Cmdline         string  `json:"cmdline" cbor:"cmdline"`
	ReadBytes       uint64  `json:"read_bytes" cbor:"read_bytes"`
	WriteBytes      uint64  `json:"write_bytes" cbor:"write_bytes"`
	Cgroup          *string `json:"cgroup" cbor:"cgroup"`
}

type processesData struct {
	BootTime *uint64          `json:"boot_time" cbor:"boot_time"`
	All      []minimalProcess `json:"all" cbor:"all"`
}

// ticksPerSecond is USER_HZ, the unit of /proc's times, which the original reports raw: 100 on
// every Linux architecture this agent runs on.
const ticksPerSecond = 100

func (s *Server) allProcesses(w http.ResponseWriter, r *http.Request, f Format) {
	st := s.Status(r.Context())
	procs := s.Processes(r.Context())
	d := processesData{All: make([]minimalProcess, 0, len(procs))}
	if st.BootTime > 0 {
		bt := uint64(st.BootTime)
		d.BootTime = &bt
	}
	for _, p := range procs {
		m := minimalProcess{
			PID: uint32(max(p.PID, 0)), PPID: uint32(max(p.PPID, 0)), UID: uint32(max(p.UID, 0)),
			Name: p.Name, State: p.State, VSize: p.VSZ, RSS: p.RSS, Swap: p.Swap,
			NumThreads:     uint32(max(p.Threads, 0)),
			StartTimestamp: uint64(max(p.StartTime, 0)),
			UserTime:       uint32(p.CPUUser * ticksPerSecond), SystemTime: uint32(p.CPUSystem * ticksPerSecond),
			Cmdline:   strings.Join(p.Cmdline, " "),
			ReadBytes: p.ReadBytes, WriteBytes: p.WriteBytes,
		}
		if len(m.State) > 1 {
			m.State = m.State[:1]
		}
		if st.BootTime > 0 && p.StartTime >= st.BootTime*1000 {
			m.StartTime = uint64(p.StartTime-st.BootTime*1000) * ticksPerSecond / 1000
		}
		if p.Cgroup != "" {
			cg := p.Cgroup
			m.Cgroup = &cg
		}
		d.All = append(d.All, m)
	}
	respond(w, f, d)
}

// peerData is the original's peer object (gossip Peer's to_json).
type peerData struct {
	ID                  string   `json:"id" cbor:"id"`
	KnownSince          uint64   `json:"known_since" cbor:"known_since"`
	IsFailing           bool     `json:"is_failing" cbor:"is_failing"`
	PrimaryAddr         *string  `json:"primary_addr" cbor:"primary_addr"`
	Addresses           []string `json:"addresses" cbor:"addresses"`
	Hostname            *string  `json:"hostname" cbor:"hostname"`
	Name                *string  `json:"name" cbor:"name"`
	Report              *uint64  `json:"report" cbor:"report"`
	Peers               *uint32  `json:"peers" cbor:"peers"`
	HasRemote           *bool    `json:"has_remote" cbor:"has_remote"`
	LastReportDirect    *uint64  `json:"last_report_direct" cbor:"last_report_direct"`
	ProbeTime           *uint64  `json:"probe_time" cbor:"probe_time"`
	ProbeAddr           *string  `json:"probe_addr" cbor:"probe_addr"`
	ProbesSent          uint64   `json:"probes_sent" cbor:"probes_sent"`
	PingsReceived       uint64   `json:"pings_received" cbor:"pings_received"`
	PongsReceived       uint64   `json:"pongs_received" cbor:"pongs_received"`
	Roundtrip           *uint64  `json:"roundtrip" cbor:"roundtrip"`
	RandomPeerRoundtrip []any    `json:"random_peer_roundtrip" cbor:"random_peer_roundtrip"`
}

func (s *Server) peers(w http.ResponseWriter, r *http.Request, f Format, onlyRemote bool) {
	out := struct {
		Peers []peerData `json:"peers" cbor:"peers"`
	}{Peers: []peerData{}}
	if s.Peers != nil {
		all := s.Peers()
		for _, p := range all {
			// Every peer of this agent answers cluster queries while it is alive: that is the
			// original's has_remote.
			if onlyRemote && !p.Alive {
				continue
			}
			out.Peers = append(out.Peers, toPeerData(p, len(all)))
		}
	}
	respond(w, f, out)
}

func toPeerData(p Peer, known int) peerData {
	ms := func(t time.Time) *uint64 {
		if t.IsZero() {
			return nil
		}
		v := uint64(max(t.UnixMilli(), 0))
		return &v
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	d := peerData{
		ID: p.ID, IsFailing: p.Failing, PrimaryAddr: str(p.Addr), Addresses: []string{},
		Hostname: str(p.Name), Name: str(p.Name),
		Report: ms(p.LastSeen), LastReportDirect: ms(p.LastSeen), ProbeTime: ms(p.LastSeen), ProbeAddr: str(p.Addr),
	}
	if since := ms(p.Since); since != nil {
		d.KnownSince = *since
	}
	if p.Addr != "" {
		d.Addresses = append(d.Addresses, p.Addr)
	}
	if d.Report != nil {
		n := uint32(known)
		d.Peers = &n
		hr := p.Alive
		d.HasRemote = &hr
	}
	if p.RTT > 0 {
		rtt := uint64(p.RTT.Milliseconds())
		d.Roundtrip = &rtt
	}
	return d
}

// addHostRequest is the original's add_host body: a socket address, IP:port.
type addHostRequest struct {
	Addr string `json:"addr"`
}

func (s *Server) addHost(w http.ResponseWriter, r *http.Request, f Format) {
	var req addHostRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad body: want {\"addr\": \"ip:port\"}: "+err.Error())
		return
	}
	if _, err := netipAddrPort(req.Addr); err != nil {
		writeError(w, http.StatusBadRequest, "bad addr: want ip:port as the original's add_host: "+err.Error())
		return
	}
	if s.Join == nil {
		writeError(w, http.StatusConflict, "gossip is off: start the agent with --cluster-name")
		return
	}
	if err := s.Join(req.Addr); err != nil {
		var he interface{ HTTPStatus() int }
		code := http.StatusBadGateway
		if errors.As(err, &he) {
			code = he.HTTPStatus()
		}
		writeError(w, code, "join "+req.Addr+": "+err.Error())
		return
	}
	respond(w, f, struct {
		OK bool `json:"ok" cbor:"ok"`
	}{true})
}

func netipAddrPort(s string) (net.IP, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return nil, fmt.Errorf("%q is not an IP address", h)
	}
	if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
		return nil, fmt.Errorf("%q is not a port", p)
	}
	return ip, nil
}
