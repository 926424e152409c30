package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/atomicfile"
)

// File names inside Config.StateDir.
const (
	PeersFile  = "cluster-peers.json"
	NodeIDFile = "node-id"
)

// stateVersion is the version of the peers file format.
const stateVersion = 1

// maxStateFile bounds what is read from a peers file; 10 000 peers fit comfortably.
const maxStateFile = 4 << 20

// peersState is the peers file: the peers this node knew, to rejoin them after a restart.
type peersState struct {
	Version int         `json:"version"`
	Cluster string      `json:"cluster"`
	Seeds   []string    `json:"seeds,omitempty"` // addresses given with --peer or Join
	Peers   []statePeer `json:"peers"`
}

type statePeer struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Addr     string `json:"addr"`
	LastSeen int64  `json:"last_seen"` // unix ms
}

// parsePeersState parses a peers file.
func parsePeersState(b []byte) (peersState, error) {
	var s peersState
	if len(b) > maxStateFile {
		return s, fmt.Errorf("peers file: %d bytes, more than %d", len(b), maxStateFile)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return peersState{}, fmt.Errorf("peers file: %w", err)
	}
	if s.Version != stateVersion {
		return peersState{}, fmt.Errorf("peers file: version %d, want %d", s.Version, stateVersion)
	}
	for i, p := range s.Peers {
		if err := checkHostPort(p.Addr); err != nil {
			return peersState{}, fmt.Errorf("peers file: peer %d: %w", i, err)
		}
	}
	for i, a := range s.Seeds {
		if a == "" {
			return peersState{}, fmt.Errorf("peers file: seed %d is empty", i)
		}
	}
	return s, nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" || port == "" {
		return fmt.Errorf("address %q: want host:port", addr)
	}
	return nil
}

// readPeersState loads dir's peers file; a missing file is an empty state.
func readPeersState(dir string) (peersState, error) {
	b, err := os.ReadFile(filepath.Join(dir, PeersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return peersState{Version: stateVersion}, nil
	}
	if err != nil {
		return peersState{}, fmt.Errorf("read peers file: %w", err)
	}
	return parsePeersState(b)
}

// writePeersState replaces dir's peers file atomically.
func writePeersState(dir string, s peersState) error {
	s.Version = stateVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode peers file: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, PeersFile), append(b, '\n'))
}

// writeFileAtomic replaces path with b (atomicfile.WriteFile), creating its directory.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	return atomicfile.WriteFile(path, b, 0o600)
}

// LoadNodeID returns the node id kept in dir, creating a random one (16 hex digits) on first
// use. The agent's status endpoint should show the same id the cluster gossips.
func LoadNodeID(dir string) (string, error) {
	path := filepath.Join(dir, NodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if err := checkNodeID(id); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node id: %w", err)
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generate node id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := writeFileAtomic(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

func checkNodeID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("node id %q: want 1 to 128 characters", id)
	}
	for _, c := range id {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("node id %q: contains space or control character", id)
		}
	}
	return nil
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
