package web

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// agentBuild is the one cantal-agent binary the browser tests of a run share: built on first
// use (a run of only the unit tests builds nothing), as `make build` builds it (CGO_ENABLED=0),
// into a directory TestMain removes. Safe for concurrent use.
type agentBuild struct {
	once sync.Once
	dir  string // removed by TestMain
	path string
	out  []byte // go build's output when it failed
	err  error
}

// agentBin is the run's build (TestMain removes its directory).
var agentBin agentBuild

// agentBinary returns the path of the agent built from this checkout, building it the first
// time; a failed build fails every test that asks.
func agentBinary(t *testing.T) string {
	t.Helper()
	b := &agentBin
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "cantal-web-bin"); b.err != nil {
			return
		}
		wd, err := os.Getwd()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(b.dir, "cantal-agent")
		build := exec.Command("go", "build", "-o", b.path, "./cmd/cantal-agent")
		build.Dir = filepath.Join(wd, "..", "..") // the module root, as repoRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = build.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build ./cmd/cantal-agent: %v\n%s", b.err, b.out)
	}
	return b.path
}

// removeAgentBinary removes the shared build, if one was made (TestMain, after the tests).
func removeAgentBinary() {
	if agentBin.dir != "" {
		os.RemoveAll(agentBin.dir)
	}
}
