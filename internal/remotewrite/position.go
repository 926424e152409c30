package remotewrite

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cantal-go/cantal/internal/atomicfile"
)

// Position is what an endpoint's position file holds: the time of the last scan the receiver
// acknowledged whole.
type Position struct {
	URL     string `json:"url"`      // redacted (RedactURL), for whoever reads the directory
	AckedMs int64  `json:"acked_ms"` // unix ms; 0: nothing acknowledged yet
	// LateMs is AckedMs of the series that may get late points (Options.Late), which are sent
	// only up to final scans; 0: as AckedMs (a file from before it existed).
	LateMs int64 `json:"late_ms,omitempty"`
}

const maxPositionBytes = 4096

// PositionFile is the name of the position file of the endpoint sending to u in a state
// directory: a hash of the whole URL (credentials included, so two accounts on one receiver
// keep two positions), never the URL itself.
func PositionFile(u string) string {
	h := sha256.Sum256([]byte(u))
	return "rw-" + hex.EncodeToString(h[:8]) + ".json"
}

// ParsePosition parses a position file's content. Anything but one JSON object with a
// non-negative acked_ms is an error (which does not quote the content).
func ParsePosition(b []byte) (Position, error) {
	var p Position
	if len(b) > maxPositionBytes {
		return p, fmt.Errorf("position file: %d bytes, at most %d", len(b), maxPositionBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return Position{}, errors.New("position file: not a position object")
	}
	if d.More() {
		return Position{}, errors.New("position file: trailing data")
	}
	if p.AckedMs < 0 {
		return Position{}, errors.New("position file: negative acked_ms")
	}
	if p.LateMs < 0 {
		return Position{}, errors.New("position file: negative late_ms")
	}
	return p, nil
}

// LoadPosition reads the position file at path. A missing file is the zero Position and no
// error.
func LoadPosition(path string) (Position, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, fmt.Errorf("read remote write position: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPositionBytes+1))
	if err != nil {
		return Position{}, fmt.Errorf("read remote write position %s: %w", path, err)
	}
	p, err := ParsePosition(b)
	if err != nil {
		return Position{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// SavePosition replaces the position file at path atomically and durably (atomicfile.WriteFile:
// a temporary file in the same directory, fsynced, renamed over path, then the directory
// fsynced). After it returns a crash leaves either the old position or p, never a torn file.
func SavePosition(path string, p Position) error {
	b, _ := json.Marshal(p)
	b = append(b, '\n')
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("save remote write position: %w", err)
	}
	return nil
}
