package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"

	"github.com/cantal-go/cantal/internal/atomicfile"
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

// readPeersState loads the peers file at path; a missing file is an empty state.
func readPeersState(path string) (peersState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return peersState{Version: stateVersion}, nil
	}
	if err != nil {
		return peersState{}, fmt.Errorf("read peers file: %w", err)
	}
	return parsePeersState(b)
}

// writePeersState replaces the peers file at path atomically and durably (atomicfile).
func writePeersState(path string, s peersState) error {
	s.Version = stateVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode peers file: %w", err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
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
