package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

func TestRemoteWriteFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rw.yml")
	os.WriteFile(file, []byte("remote_write:\n  - url: https://mimir.example/api/v1/push\n    external_labels: {dc: a}\n"), 0o600)
	cfg, err := ParseFlags("cantal-agent", []string{"--remote-write", "http://a:9090/api/v1/write",
		"--remote-write", "http://b:8428/api/v1/write", "--remote-write-config", file, "--state-dir", dir,
		"--listen", "0.0.0.0:9100", "--node-name", "n1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	state, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler), hist: history.New(history.Options{Retention: time.Hour}), state: state}
	if err := a.openRemoteWrite(); err != nil {
		t.Fatal(err)
	}
	if len(a.endpoints()) != 3 {
		t.Fatalf("%d endpoints; want 3", len(a.endpoints()))
	}
	st := a.remoteWriteStatus()
	if st[0].URL != "http://a:9090/api/v1/write" || st[2].Name != "mimir.example" {
		t.Errorf("status %+v", st)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--remote-write", "ftp://x/"}, "http"},
		{[]string{"--remote-write", "http://x/w", "--remote-write", "http://x/w"}, "twice"},
		{[]string{"--remote-write-config", filepath.Join(dir, "missing.yml")}, "--remote-write-config"},
	} {
		cfg, err := ParseFlags("cantal-agent", append(tc.args, "--state-dir", ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler), hist: history.New(history.Options{})}
		if err := a.openRemoteWrite(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error about %q", tc.args, err, tc.want)
		}
	}
}

func TestListenPort(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:22682":            "22682",
		"unix:/run/c.sock,[::]:9100": "9100",
		"unix:/run/c.sock":           "22682",
		"127.0.0.1:0":                "22682",
	} {
		if got := listenPort(in); got != want {
			t.Errorf("listenPort(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestPromNamer: remote write names a series as /metrics does (internal/promname).
func TestPromNamer(t *testing.T) {
	n := promNamer(promname.Options{})
	name, labels, scale, ok := n(series.Labels{"metric": "cpu.idle_ms", "cpu": "0"}, series.Counter)
	if !ok || name != "node_cpu_seconds_total" || scale != 0.001 || len(labels) != 2 ||
		labels[0] != (remotewrite.Label{Name: "cpu", Value: "0"}) || labels[1] != (remotewrite.Label{Name: "mode", Value: "idle"}) {
		t.Errorf("cpu.idle_ms{cpu=0} = %q %v ×%v %v; want node_cpu_seconds_total{cpu=0,mode=idle} ×0.001", name, labels, scale, ok)
	}
	if _, _, _, ok := n(series.Labels{"metric": "app.state"}, series.State); ok {
		t.Error("a state series is sent; it has no history")
	}
	name, _, _, ok = n(series.Labels{"metric": "requests.number", "pid": "7"}, series.Counter)
	if !ok || name != "requests_number_total" {
		t.Errorf("application counter named %q, %v", name, ok)
	}
}
