package agent

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReloadAlertmanagers: a reload applies a changed --alertmanager-config file (its contents,
// the path unchanged), refuses a broken one keeping the Alertmanagers in force, and finds
// nothing changed when nothing did.
func TestReloadAlertmanagers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.yml")
	amFile := filepath.Join(dir, "am.yml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(amFile, "alertmanagers: [{url: 'http://127.0.0.1:1'}]\n")
	write(file, "alertmanager-config: "+amFile+"\n")
	cfg, err := ParseFlags("cantal-agent", []string{"--config", file, "--listen", "127.0.0.1:0", "--state-dir", "", "--rrdd-dir", ""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := NewLogger(io.Discard, "info", "text")
	a, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	urls := func() []string {
		var out []string
		for _, c := range a.reload.am {
			out = append(out, c.URL)
		}
		return out
	}
	if got := urls(); !slices.Equal(got, []string{"http://127.0.0.1:1"}) || !a.notifier.Configured() {
		t.Fatalf("at start: %v; want the file's Alertmanager", got)
	}
	if res := a.Reload(); res.Status != "success" || len(res.Changed) != 0 {
		t.Errorf("unchanged reload = %+v; want nothing changed", res)
	}
	write(amFile, "alertmanagers: [{url: 'http://127.0.0.1:1'}, {url: 'https://127.0.0.1:2', timeout: 3s}]\n")
	if res := a.Reload(); res.Status != "success" || !slices.Equal(res.Changed, []string{"alertmanager-config"}) {
		t.Errorf("reload with the file changed = %+v; want alertmanager-config changed", res)
	}
	if got := urls(); !slices.Equal(got, []string{"http://127.0.0.1:1", "https://127.0.0.1:2"}) {
		t.Errorf("after the reload: %v; want both", got)
	}
	write(amFile, "alertmanagers: [{url: 'http://127.0.0.1:1', nope: 1}]\n")
	if res := a.Reload(); res.Status != "error" || !strings.Contains(res.Error, "alertmanager") {
		t.Errorf("reload with a broken file = %+v; want an error", res)
	}
	if got := urls(); len(got) != 2 {
		t.Errorf("after a refused reload: %v; want the two in force", got)
	}
	write(amFile, "alertmanagers: []\n")
	if res := a.Reload(); res.Status != "success" || a.notifier.Configured() {
		t.Errorf("reload with none = %+v, configured %v; want none configured", res, a.notifier.Configured())
	}
}
