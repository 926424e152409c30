package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func cantal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "cantal"), args...).CombinedOutput()
	return string(out), err
}

// TestCLI: the cantal tool reads an application's files with no agent, and queries a real agent
// with tables and JSON.
func TestCLI(t *testing.T) {
	serial(t)
	app := startProc(t, []string{"CANTAL_PATH=" + filepath.Join(t.TempDir(), "app")}, nil,
		filepath.Join(bin, "testapp"), "-state", "cli test")
	// No agent: straight from the files, by pid.
	waitFor(t, 5*time.Second, func() error {
		out, err := cantal(t, "values", app.pid())
		if err != nil {
			return fmt.Errorf("cantal values: %v: %s", err, out)
		}
		for _, want := range []string{"requests.number", "queue.length", "temperature", "cli test"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("cantal values output lacks %q:\n%s", want, out)
			}
		}
		return nil
	})

	a := startAgent(t)
	sel := fmt.Sprintf(`{pid=%q}`, app.pid())
	waitFor(t, 5*time.Second, func() error {
		out, err := cantal(t, "metrics", "--agent", a.URL, "-o", "json", sel)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var ans struct{ Series []Series }
		if err := json.Unmarshal([]byte(out), &ans); err != nil {
			return fmt.Errorf("-o json is not JSON: %v\n%s", err, out)
		}
		if find(ans.Series, "requests.number") == nil {
			return fmt.Errorf("no requests.number in %s", out)
		}
		return nil
	})
	out, err := cantal(t, "metrics", "--agent", a.URL, sel)
	if err != nil || !strings.Contains(out, "requests.number") || !strings.Contains(out, "cli test") {
		t.Errorf("cantal metrics table: %v\n%s", err, out)
	}
	out, err = cantal(t, "status", "--agent", a.URL)
	if err != nil || !strings.Contains(out, "node") {
		t.Errorf("cantal status: %v\n%s", err, out)
	}
	// An agent's error is shown, with a non-zero exit.
	out, err = cantal(t, "metrics", "--agent", a.URL, "{metric=")
	if err == nil || !strings.Contains(out, "400") {
		t.Errorf("cantal metrics with a bad selector = %v\n%s; want an error naming the 400", err, out)
	}
}
