// Package statedir owns the agent's state directory (--state-dir): it is the one place that
// names a file there, and it holds the directory's lock and the node id itself. What the agent
// keeps there, and who writes it:
//
//	lock                  this package: flock(2)ed by the running agent (Open), never written
//	node-id               this package: the node's id, made once by Open (16 hex digits)
//	cluster-peers.json    internal/cluster, at PeersFile: the peers to rejoin after a restart
//	history/              internal/history (Saver), at HistoryDir: the history snapshot
//	history.snap          never written: pre-release agents' single-file snapshot, no longer read;
//	                      history.LoadDir reports it at LegacyHistoryFile and leaves it in place
//	positions/            this package (Position): where each shipper (carbon, remote write)
//	                      stands in the history, one file per shipper and target
//
// Files of earlier versions are read once, when their successor does not exist yet, and deleted
// by the first write of the successor: carbon-*.pos and remote-write/rw-*.json (Position). Every write goes through internal/atomicfile (temporary file,
// fsync, rename, fsync of the directory), so a crash leaves a file's old content or its new one.
// Written lists what the agent may write there; a test runs the agent and holds it to that list.
//
// Concurrency: a Dir is made by Open and is safe for concurrent use; its methods only read
// fields set by Open. Each Position has one writer (its shipper's goroutine): distinct
// Positions may be saved concurrently, one Position's Save must not run concurrently with
// itself. Two agents never share a directory: Open fails while another process holds its lock.
package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cantal-go/cantal/internal/atomicfile"
)

// The names in the state directory.
const (
	LockFile          = "lock"
	NodeIDFile        = "node-id"
	PeersFileName     = "cluster-peers.json"
	HistoryDirName    = "history"
	LegacyHistoryName = "history.snap"
	PositionsDirName  = "positions"

	legacyRemoteWriteDir = "remote-write" // remote write positions of earlier versions
)

// Dir is an open state directory: its lock held and its node id read. Close releases the lock.
type Dir struct {
	path   string
	lock   *os.File
	nodeID string
}

// Open creates the directory at path (mode 0700) if needed, takes its lock (an exclusive,
// non-blocking flock: two agents sharing a directory would overwrite each other's files) and
// reads the node id, making a random one on first use. A node id file that is not a valid id
// is an error: the id is the node's identity in the cluster, so it is never replaced silently.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("state directory: no path")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	lockPath := filepath.Join(path, LockFile)
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another agent holds %s: %w", lockPath, err)
	}
	d := &Dir{path: path, lock: f}
	if d.nodeID, err = loadNodeID(filepath.Join(path, NodeIDFile)); err != nil {
		f.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the directory's lock.
func (d *Dir) Close() error { return d.lock.Close() }

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// NodeID is the node's id, kept in the directory across restarts.
func (d *Dir) NodeID() string { return d.nodeID }

// PeersFile is the path of internal/cluster's peers file.
func (d *Dir) PeersFile() string { return filepath.Join(d.path, PeersFileName) }

// HistoryDir is the history snapshot's directory (internal/history.Saver).
func (d *Dir) HistoryDir() string { return filepath.Join(d.path, HistoryDirName) }

// LegacyHistoryFile is the single-file history snapshot of pre-release agents: no longer read;
// history.LoadDir reports it (the operator removes it).
func (d *Dir) LegacyHistoryFile() string { return filepath.Join(d.path, LegacyHistoryName) }

// loadNodeID reads the node id at path, or makes and saves a random one when there is none.
func loadNodeID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if err := CheckNodeID(id); err != nil {
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
	if err := atomicfile.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

// CheckNodeID tells whether id is a valid node id: 1 to 128 characters, no white space or
// control character. The error does not quote the id.
func CheckNodeID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("node id: want 1 to 128 characters, got %d bytes", len(id))
	}
	for _, c := range id {
		if c <= ' ' || c == 0x7f {
			return errors.New("node id: contains space or control character")
		}
	}
	return nil
}

// Written tells whether rel, a slash-separated path relative to the state directory, is one
// the agent may write: the names of the package comment (history/ holds files of
// internal/history's choosing, one level deep). The files of earlier versions are not among
// them: the agent reads and deletes them, never writes them. A test runs the agent and fails
// if it leaves anything else.
func Written(rel string) bool {
	switch rel {
	case LockFile, NodeIDFile, PeersFileName, HistoryDirName, PositionsDirName:
		return true
	}
	dir, name, ok := strings.Cut(rel, "/")
	if !ok || name == "" || strings.Contains(name, "/") || strings.HasSuffix(name, atomicfile.TempSuffix) {
		return false
	}
	switch dir {
	case HistoryDirName:
		return true
	case PositionsDirName:
		return positionName.MatchString(name)
	}
	return false
}
