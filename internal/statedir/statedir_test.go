package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOpenMakesAndKeepsNodeID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := d.NodeID()
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("node id %q; want 16 hex digits", id)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "another agent holds") {
		t.Fatalf("second Open while locked = %v; want the lock refused", err)
	}
	d.Close()
	d2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if d2.NodeID() != id {
		t.Errorf("reopened node id %q; want %q kept", d2.NodeID(), id)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v, %v; want 0700", fi.Mode(), err)
	}
}

func TestOpenRefusesBadNodeID(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, NodeIDFile), []byte("has secret space\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	if err == nil {
		t.Fatal("Open accepted a node id with a space")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error quotes the file: %v", err)
	}
	// The lock was released: a fixed file opens.
	os.WriteFile(filepath.Join(dir, NodeIDFile), []byte("node-7\n"), 0o600)
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.NodeID() != "node-7" {
		t.Errorf("node id %q; want node-7 as written by hand", d.NodeID())
	}
}

func TestPositionRoundTripOneFormat(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rw := d.Position(RemoteWrite, "https://user:secret@h/api/v1/write", "https://h/api/v1/write")
	cb := d.Position(Carbon, "127.0.0.1:2003", "127.0.0.1:2003")
	for _, p := range []*PositionFile{rw, cb} {
		if got, err := p.Load(); err != nil || got != (Position{}) {
			t.Fatalf("Load of a new position = %+v, %v; want zero", got, err)
		}
	}
	if err := rw.Save(Position{AckedMs: 1000, LateMs: 900}); err != nil {
		t.Fatal(err)
	}
	if err := cb.Save(Position{AckedMs: 2000}); err != nil {
		t.Fatal(err)
	}
	if got, err := rw.Load(); err != nil || got != (Position{1000, 900}) {
		t.Errorf("remote write Load = %+v, %v", got, err)
	}
	if got, err := cb.Load(); err != nil || got != (Position{AckedMs: 2000}) {
		t.Errorf("carbon Load = %+v, %v", got, err)
	}
	for _, p := range []*PositionFile{rw, cb} {
		b, _ := os.ReadFile(p.Path())
		if strings.Contains(string(b), "secret") {
			t.Errorf("%s holds the credentials: %s", p.Path(), b)
		}
		rel, _ := filepath.Rel(d.Path(), p.Path())
		if !Written(filepath.ToSlash(rel)) {
			t.Errorf("position file %s is not among the files Written", rel)
		}
		if _, err := ParsePosition(b); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(d.Path(), PositionsDirName)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("positions directory: %v, %v; want mode 0700", fi, err)
	}
	// Two accounts on one receiver keep two positions.
	other := d.Position(RemoteWrite, "https://user2:secret@h/api/v1/write", "https://h/api/v1/write")
	if other.Path() == rw.Path() {
		t.Error("two URLs differing in credentials share a position file")
	}
	// Damaged: an error that does not quote it.
	os.WriteFile(cb.Path(), []byte("secret garbage"), 0o600)
	if _, err := cb.Load(); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("damaged Load error = %v; want one that does not quote the file", err)
	}
}

// An installed node keeps its place: the position files of earlier versions (carbon's decimal
// carbon-<addr>.pos, remote write's remote-write/rw-<hash>.json) are read while the new file
// does not exist, and deleted by the first save.
func TestPositionUpgradeFromEarlierFormats(t *testing.T) {
	dir := t.TempDir()
	const url = "http://user:pw@127.0.0.1:9090/api/v1/write"
	// The names and contents earlier versions wrote (carbon.Node(addr), remotewrite.PositionFile).
	os.WriteFile(filepath.Join(dir, "carbon-127_0_0_1_2003.pos"), []byte("1700000000000"), 0o600)
	os.MkdirAll(filepath.Join(dir, "remote-write"), 0o700)
	h := sha256.Sum256([]byte(url))
	oldRW := filepath.Join(dir, "remote-write", "rw-"+hex.EncodeToString(h[:8])+".json")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rw := d.Position(RemoteWrite, url, "http://127.0.0.1:9090/api/v1/write")
	os.WriteFile(oldRW, []byte(`{"url":"http://127.0.0.1:9090/api/v1/write","acked_ms":1700000002000,"late_ms":1700000001000}`+"\n"), 0o600)
	cb := d.Position(Carbon, "127.0.0.1:2003", "127.0.0.1:2003")

	if got, err := cb.Load(); err != nil || got != (Position{AckedMs: 1700000000000}) {
		t.Errorf("carbon Load from the old file = %+v, %v", got, err)
	}
	if got, err := rw.Load(); err != nil || got != (Position{1700000002000, 1700000001000}) {
		t.Errorf("remote write Load from the old file = %+v, %v", got, err)
	}
	if err := cb.Save(Position{AckedMs: 1700000003000}); err != nil {
		t.Fatal(err)
	}
	if err := rw.Save(Position{AckedMs: 1700000004000, LateMs: 1700000002500}); err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{filepath.Join(dir, "carbon-127_0_0_1_2003.pos"), oldRW, filepath.Dir(oldRW)} {
		if _, err := os.Stat(old); !os.IsNotExist(err) {
			t.Errorf("%s still there after the first save (%v)", old, err)
		}
	}
	if got, _ := cb.Load(); got.AckedMs != 1700000003000 {
		t.Errorf("carbon after save = %+v", got)
	}
	if got, _ := rw.Load(); got != (Position{1700000004000, 1700000002500}) {
		t.Errorf("remote write after save = %+v", got)
	}
}

func TestWritten(t *testing.T) {
	for rel, want := range map[string]bool{
		"lock": true, "node-id": true, "cluster-peers.json": true, "history": true, "history/HEAD": true,
		"positions": true, "positions/carbon-0123456789abcdef.json": true,
		"positions/remote-write-0123456789abcdef.json": true,
		"positions/carbon-0123456789abcdef.json.tmp":   false, "positions/x.json": false,
		"history/HEAD.tmp": false, "node-id.tmp": false, "stray": false, "rw-1.json": false,
		"history/a/b": false, "remote-write/other": false, "history/": false,
		// Earlier versions' files: read and deleted, never written.
		"carbon-127_0_0_1_2003.pos": false, "remote-write": false, "remote-write/rw-0123456789abcdef.json": false,
		"history.snap": false,
	} {
		if got := Written(rel); got != want {
			t.Errorf("Written(%q) = %v; want %v", rel, got, want)
		}
	}
}

func FuzzParsePosition(f *testing.F) {
	f.Add([]byte(`{"shipper":"carbon","target":"h:2003","acked_ms":1}`))
	f.Add([]byte(`{"shipper":"remote-write","target":"http://h/w","acked_ms":2,"late_ms":1}`))
	f.Add([]byte(`{"url":"x","acked_ms":5}`))
	f.Add([]byte("1700000000000\n"))
	f.Add([]byte(`{"shipper":"carbon","acked_ms":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, parse := range []func([]byte) (Position, error){ParsePosition, parseLegacyCarbon, parseLegacyRemoteWrite} {
			p, err := parse(b)
			if err == nil && (p.AckedMs < 0 || p.LateMs < 0) {
				t.Fatalf("accepted a negative time: %+v", p)
			}
			if err != nil && len(b) > 8 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("error quotes the content: %v", err)
			}
		}
		// Carbon's earlier file: a positive decimal and nothing else but white space.
		if p, err := parseLegacyCarbon(b); err == nil {
			trim := strings.TrimLeft(strings.TrimSpace(string(b)), "+0")
			if p.AckedMs <= 0 || strconv.FormatInt(p.AckedMs, 10) != trim {
				t.Fatalf("parseLegacyCarbon(%q) = %d", b, p.AckedMs)
			}
		}
	})
}
