package build

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests build the amd64 (host) binaries once, static as make package does, into work.
var (
	work      string
	buildOnce sync.Once
	buildErr  error
	pkgMu     sync.Mutex
	debs      = map[string]string{} // version → .deb
)

func TestMain(m *testing.M) {
	var err error
	if work, err = os.MkdirTemp("", "cantal-packaging-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(work)
	os.Exit(code)
}

var stamp = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// bins returns the directory holding ARCH/cantal-agent and ARCH/cantal for the host's arch.
func bins(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/cantal-go/cantal/internal/buildinfo.Version=test",
			"-o", filepath.Join(work, "bin", runtime.GOARCH)+"/", "./cmd/...")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(work, "bin")
}

// agentBinary is the static agent the packages and the image hold.
func agentBinary(t *testing.T) string {
	return filepath.Join(bins(t), runtime.GOARCH, "cantal-agent")
}

// packages builds the .deb and .rpm of version for the host's arch (once per version) and
// returns the .deb's path; the .rpm is beside it.
func packages(t *testing.T, version string) string {
	t.Helper()
	b := bins(t)
	pkgMu.Lock()
	defer pkgMu.Unlock()
	if p, ok := debs[version]; ok {
		return p
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "dist")
	paths, err := Packages(Options{Version: version, Date: stamp, Root: root, Bins: b, Out: out, Arches: []string{runtime.GOARCH}})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || filepath.Base(paths[0]) != DebName(version, runtime.GOARCH) || filepath.Base(paths[1]) != RPMName(version, runtime.GOARCH) {
		t.Fatalf("Packages wrote %v", paths)
	}
	debs[version] = paths[0]
	return paths[0]
}

// need returns the path of a program the test runs (scripts/install-deps.sh test installs
// it); its absence fails the test.
func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is not installed (sh scripts/install-deps.sh test): %v", prog, err)
	}
	return p
}

// run runs a command and returns its standard output; a failure fails the test with both outputs.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// freePort is a loopback TCP port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// status is what the tests read of /api/v1/status.
type status struct {
	NodeID   string `json:"node_id"`
	LastScan struct {
		Scans int64 `json:"scans"`
	} `json:"last_scan"`
	Counts struct {
		Processes     int   `json:"processes"`
		HistoryPoints int64 `json:"history_points"`
	} `json:"counts"`
	Config struct {
		Reloads              int64  `json:"reloads"`
		LastReloadSuccessful bool   `json:"last_reload_successful"`
		LastReloadError      string `json:"last_reload_error"`
	} `json:"config"`
}

// waitStatus polls the agent at addr until it has made at least scans scans, or the deadline.
func waitStatus(t *testing.T, addr string, scans int64, exited <-chan error, logs ...*bytes.Buffer) status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last error
	for {
		st, err := getStatus(ctx, addr)
		if err == nil && st.LastScan.Scans >= scans {
			return st
		}
		if err != nil {
			last = err
		}
		select {
		case err := <-exited:
			t.Fatalf("agent at %s exited: %v (last: %v)\n%s", addr, err, last, joined(logs))
		case <-ctx.Done():
			t.Fatalf("agent at %s: no %d scans in time: %v %+v\n%s", addr, scans, last, st, joined(logs))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func getStatus(ctx context.Context, addr string) (status, error) {
	var st status
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("status %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return b.String()
}

func joined(logs []*bytes.Buffer) string {
	var s []string
	for _, b := range logs {
		s = append(s, b.String())
	}
	return strings.Join(s, "\n")
}
