// Package golden compares a test's output with a file under testdata, or rewrites the file
// when CANTAL_UPDATE_GOLDEN is set (run the test once that way to write a new golden; the
// diff then shows what changed). Only tests import it.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Update reports whether goldens are being rewritten (CANTAL_UPDATE_GOLDEN set).
func Update() bool { return os.Getenv("CANTAL_UPDATE_GOLDEN") != "" }

// Check fails t unless got is byte for byte the content of path; with Update it writes got
// to path instead (making its directory).
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("differs from %s:\n got  %s\n want %s", path, got, want)
	}
}
