package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/statedir"
)

// TestStateDirHoldsOnlyKnownFiles runs the agent with every writer of the state directory on
// (history snapshots, gossip, a carbon output and a remote-write endpoint, each against a sink
// on loopback), in a directory holding the position files of an earlier version, stops it,
// and lists the directory: every file must be one internal/statedir says the agent writes
// (statedir.Written; the earlier files replaced), the expected ones must be there, and the
// node id the agent shows must be the one in the directory.
func TestStateDirHoldsOnlyKnownFiles(t *testing.T) {
	serial(t)
	carbonLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer carbonLn.Close()
	var carbonBytes atomic.Int64
	go func() {
		for {
			c, err := carbonLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 32<<10)
				for {
					n, err := c.Read(b)
					carbonBytes.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	var requests atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()

	// A node upgraded from a version with other position files: they are read once and
	// deleted by the first save (the listing below would name them).
	dir := t.TempDir()
	rwURL := rcv.URL + "/api/v1/write"
	oldAcked := time.Now().Add(-time.Minute).UnixMilli()
	sum := sha256.Sum256([]byte(rwURL))
	oldCarbon := filepath.Join(dir, "carbon-"+strings.NewReplacer(".", "_", ":", "_").Replace(carbonLn.Addr().String())+".pos")
	oldRW := filepath.Join(dir, "remote-write", "rw-"+hex.EncodeToString(sum[:8])+".json")
	os.MkdirAll(filepath.Dir(oldRW), 0o700)
	os.WriteFile(oldCarbon, []byte(strconv.FormatInt(oldAcked, 10)), 0o600)
	os.WriteFile(oldRW, []byte(fmt.Sprintf(`{"url":%q,"acked_ms":%d}`, rwURL, oldAcked)), 0o600)

	a := startAgent(t, "--carbon", carbonLn.Addr().String(), "--carbon-interval", "500ms", "--state-dir", dir,
		"--remote-write", rwURL, "--cluster-name", "statedir-e2e", "--snapshot-interval", "1s")
	// Both sinks take something; then both shippers save a position (not waited for with
	// waitFor: a missing file is reported with the listing below, which names what was
	// written instead).
	waitFor(t, 60*time.Second, func() error {
		if carbonBytes.Load() == 0 || requests.Load() == 0 {
			return fmt.Errorf("carbon got %d bytes, remote write %d requests", carbonBytes.Load(), requests.Load())
		}
		return nil
	})
	for _, pat := range []string{"positions/carbon-*.json", "positions/remote-write-*.json"} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("no %s after 30 s", pat)
				break
			}
		}
	}
	var st struct {
		NodeID string `json:"node_id"`
	}
	if err := a.get("/api/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	a.stop(syscall.SIGTERM)

	idFile, err := os.ReadFile(filepath.Join(dir, statedir.NodeIDFile))
	if err != nil || strings.TrimSpace(string(idFile)) != st.NodeID || st.NodeID == "" {
		t.Errorf("node id file %q, %v; the agent showed %q", idFile, err, st.NodeID)
	}
	var listing []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		listing = append(listing, rel)
		if !statedir.Written(rel) {
			t.Errorf("the agent left %s in its state directory; statedir.Written does not list it", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{statedir.LockFile, statedir.NodeIDFile, statedir.HistoryDirName + "/HEAD"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("%s missing after a run: %v", want, err)
		}
	}
	t.Logf("state directory after a run: %v", listing)
}
