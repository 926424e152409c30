package statedir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/cantal-go/cantal/internal/atomicfile"
)

// Shipper names a kind of shipper: what sends the history elsewhere from a position.
type Shipper string

// The shippers that keep a position.
const (
	Carbon      Shipper = "carbon"
	RemoteWrite Shipper = "remote-write"
)

// Position is where a shipper stands in the history: the scan times (unix ms) its target
// acknowledged. One format for every shipper.
type Position struct {
	// AckedMs is the last scan the target acknowledged whole; 0: nothing yet.
	AckedMs int64
	// LateMs is AckedMs of the series that may get late points, for a shipper that sends them
	// in a pass of their own (remote write); 0: none, or as AckedMs.
	LateMs int64
}

// positionJSON is a position file's content.
type positionJSON struct {
	Shipper Shipper `json:"shipper"`
	Target  string  `json:"target"` // as the shipper shows it (credentials removed), for whoever reads the directory
	AckedMs int64   `json:"acked_ms"`
	LateMs  int64   `json:"late_ms,omitempty"`
}

// maxPositionBytes bounds what is read from a position file.
const maxPositionBytes = 4096

// positionName is a position file's name in PositionsDirName.
var positionName = regexp.MustCompile(`^(carbon|remote-write)-[0-9a-f]{16}\.json$`)

// PositionFile is the position file of one shipper and target. Build it with Dir.Position.
// Load and Save are called by the shipper's goroutine only (see the package comment).
type PositionFile struct {
	path    string
	shipper Shipper
	shown   string
	// legacy is the file an earlier version kept the position in, read by Load while path does
	// not exist, and deleted by the first Save.
	legacy      string
	parseLegacy func([]byte) (Position, error)
}

// Position returns the position file of shipper's target: target identifies it (the whole
// remote-write URL, credentials included, so that two accounts on one receiver keep two
// positions; the carbon address, so that a new server starts afresh), and is never written;
// shown is what the file says the target is. The file's name is a hash of target.
func (d *Dir) Position(s Shipper, target, shown string) *PositionFile {
	h := sha256.Sum256([]byte(target))
	p := &PositionFile{
		path:    filepath.Join(d.path, PositionsDirName, string(s)+"-"+hex.EncodeToString(h[:8])+".json"),
		shipper: s,
		shown:   shown,
	}
	switch s {
	case Carbon:
		p.legacy, p.parseLegacy = filepath.Join(d.path, "carbon-"+legacyCarbonNode(target)+".pos"), parseLegacyCarbon
	case RemoteWrite:
		p.legacy = filepath.Join(d.path, legacyRemoteWriteDir, "rw-"+hex.EncodeToString(h[:8])+".json")
		p.parseLegacy = parseLegacyRemoteWrite
	}
	return p
}

// Path is the position file's path.
func (p *PositionFile) Path() string { return p.path }

// Load reads the position. A missing file is the zero Position and no error; while the file
// does not exist, the file an earlier version kept this position in is read instead, so an
// upgraded node keeps its place. Errors name the file but never quote its content.
func (p *PositionFile) Load() (Position, error) {
	b, err := readSmall(p.path)
	if err == nil {
		pos, err := ParsePosition(b)
		if err != nil {
			return Position{}, fmt.Errorf("%s: %w", p.path, err)
		}
		return pos, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Position{}, fmt.Errorf("read position: %w", err)
	}
	if p.legacy == "" {
		return Position{}, nil
	}
	b, err = readSmall(p.legacy)
	if errors.Is(err, fs.ErrNotExist) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, fmt.Errorf("read position: %w", err)
	}
	pos, err := p.parseLegacy(b)
	if err != nil {
		return Position{}, fmt.Errorf("%s: %w", p.legacy, err)
	}
	return pos, nil
}

// Save replaces the position file atomically and durably (atomicfile.WriteFile): after it
// returns a crash leaves pos, and a crash during it the old position, never a torn file. The
// first Save deletes the file of an earlier version.
func (p *PositionFile) Save(pos Position) error {
	if pos.AckedMs < 0 || pos.LateMs < 0 {
		return errors.New("save position: negative time")
	}
	b, _ := json.Marshal(positionJSON{Shipper: p.shipper, Target: p.shown, AckedMs: pos.AckedMs, LateMs: pos.LateMs})
	b = append(b, '\n')
	if err := os.MkdirAll(filepath.Dir(p.path), 0o700); err != nil {
		return fmt.Errorf("save position: %w", err)
	}
	if err := atomicfile.WriteFile(p.path, b, 0o600); err != nil {
		return fmt.Errorf("save position: %w", err)
	}
	if p.legacy != "" {
		if err := os.Remove(p.legacy); err == nil || errors.Is(err, fs.ErrNotExist) {
			if filepath.Base(filepath.Dir(p.legacy)) == legacyRemoteWriteDir {
				os.Remove(filepath.Dir(p.legacy)) // once empty: the last endpoint upgraded
			}
			p.legacy = ""
		}
	}
	return nil
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxPositionBytes+1))
}

// ParsePosition parses a position file: one JSON object with the shipper, its target and
// non-negative times, nothing else. Errors do not quote the content.
func ParsePosition(b []byte) (Position, error) {
	var j positionJSON
	if err := decodeStrict(b, &j); err != nil {
		return Position{}, err
	}
	if j.Shipper != Carbon && j.Shipper != RemoteWrite {
		return Position{}, errors.New("position file: unknown shipper")
	}
	if j.AckedMs < 0 || j.LateMs < 0 {
		return Position{}, errors.New("position file: negative time")
	}
	return Position{AckedMs: j.AckedMs, LateMs: j.LateMs}, nil
}

func decodeStrict(b []byte, v any) error {
	if len(b) > maxPositionBytes {
		return fmt.Errorf("position file: %d bytes, at most %d", len(b), maxPositionBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return errors.New("position file: not a position object")
	}
	if d.More() {
		return errors.New("position file: trailing data")
	}
	return nil
}

// parseLegacyCarbon reads carbon's position file of earlier versions: a positive unix-ms time
// in decimal, nothing else but surrounding white space.
func parseLegacyCarbon(b []byte) (Position, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 19 {
		return Position{}, fmt.Errorf("want a unix-ms time, got %d bytes", len(b))
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v <= 0 {
		return Position{}, errors.New("want a positive unix-ms time in decimal")
	}
	return Position{AckedMs: v}, nil
}

// parseLegacyRemoteWrite reads remote write's position file of earlier versions:
// {"url": redacted, "acked_ms": t, "late_ms": t}, late_ms missing in the oldest ones.
func parseLegacyRemoteWrite(b []byte) (Position, error) {
	var j struct {
		URL     string `json:"url"`
		AckedMs int64  `json:"acked_ms"`
		LateMs  int64  `json:"late_ms,omitempty"`
	}
	if err := decodeStrict(b, &j); err != nil {
		return Position{}, err
	}
	if j.AckedMs < 0 || j.LateMs < 0 {
		return Position{}, errors.New("position file: negative time")
	}
	return Position{AckedMs: j.AckedMs, LateMs: j.LateMs}, nil
}

// legacyCarbonNode is the node name earlier versions gave a carbon address in their position
// file's name (carbon.Node's rule: every byte other than ASCII letters, digits, "-" and "_"
// becomes "_"), kept here only to find that file.
func legacyCarbonNode(s string) string {
	if s == "" {
		return "_"
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
