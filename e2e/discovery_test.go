package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPrometheusDiscoversClusterThroughOneNode points a real Prometheus's http_sd_configs at
// one node of a three-node cluster on loopback: it finds and scrapes all three (each with its
// own node label and the cluster's, and each exporting cantal_build_info), then only the two
// left once one agent is stopped (issue 33). Its agents and Prometheus are its own, and it
// asserts only on what they found: a test of the second line (aside).
func TestPrometheusDiscoversClusterThroughOneNode(t *testing.T) {
	aside(t)
	prom := need(t, "prometheus")
	const clusterName = "sd-cluster"
	a1 := startAgent(t, "--cluster-name", clusterName, "--node-name", "sd1", "--interval", "1s")
	seed := strings.TrimPrefix(a1.URL, "http://")
	a2 := startAgent(t, "--cluster-name", clusterName, "--node-name", "sd2", "--interval", "1s", "--peer", seed)
	a3 := startAgent(t, "--cluster-name", clusterName, "--node-name", "sd3", "--interval", "1s", "--peer", seed)
	addrs := map[string]string{"sd1": seed, "sd2": strings.TrimPrefix(a2.URL, "http://"), "sd3": strings.TrimPrefix(a3.URL, "http://")}

	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\nscrape_configs:\n"+
		"  - job_name: cantal\n    http_sd_configs:\n      - url: %q\n        refresh_interval: 2s\n",
		a1.URL+"/api/v1/targets")
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	api := "http://" + freePort(t)
	startProc(t, nil, nil, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+strings.TrimPrefix(api, "http://"), "--log.level=warn")

	// up lists Prometheus's active targets that are up, as "node=address".
	type target struct {
		Labels    map[string]string
		ScrapeURL string
		Health    string
		LastError string
	}
	targets := func() ([]target, error) {
		var ans struct {
			Status string
			Data   struct{ ActiveTargets []target }
		}
		if err := httpJSON(api+"/api/v1/targets?state=active", &ans); err != nil {
			return nil, err
		}
		return ans.Data.ActiveTargets, nil
	}
	waitUp := func(want []string) {
		t.Helper()
		waitFor(t, 90*time.Second, func() error {
			ts, err := targets()
			if err != nil {
				return err
			}
			var got []string
			for _, tg := range ts {
				if tg.Health != "up" {
					return fmt.Errorf("target %v is %s (%s)", tg.Labels, tg.Health, tg.LastError)
				}
				if tg.Labels["cluster"] != clusterName || tg.Labels["job"] != "cantal" {
					return fmt.Errorf("target %v lacks the cluster or job label", tg.Labels)
				}
				got = append(got, tg.Labels["node"]+"="+tg.Labels["instance"])
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				return fmt.Errorf("targets up: %v; want %v", got, want)
			}
			return nil
		})
	}
	waitUp([]string{"sd1=" + addrs["sd1"], "sd2=" + addrs["sd2"], "sd3=" + addrs["sd3"]})
	// Prometheus has scraped each: every node's cantal_build_info is stored under its node label.
	waitFor(t, 60*time.Second, func() error {
		ans, err := promQuery(api, `cantal_build_info{job="cantal"}`)
		if err != nil {
			return err
		}
		var nodes []string
		for _, r := range ans.Data.Result {
			if r.Metric["version"] == "" || r.Metric["goversion"] == "" || r.Metric["revision"] == "" {
				return fmt.Errorf("cantal_build_info without its labels: %v", r.Metric)
			}
			nodes = append(nodes, r.Metric["node"])
		}
		sort.Strings(nodes)
		if strings.Join(nodes, ",") != "sd1,sd2,sd3" {
			return fmt.Errorf("cantal_build_info of nodes %v; want sd1,sd2,sd3", nodes)
		}
		return nil
	})

	// sd3 leaves: the seed's membership drops it, and so does Prometheus's discovery.
	a3.stop(syscall.SIGTERM)
	waitUp([]string{"sd1=" + addrs["sd1"], "sd2=" + addrs["sd2"]})
}

// TestAgentVersionAndCheckConfig runs the real binaries: --version on both, and
// --check-config's exit status and first error with its file:line, a world-writable file
// refused (issue 33).
func TestAgentVersionAndCheckConfig(t *testing.T) {
	serial(t)
	run := func(name string, args ...string) (string, int) {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, name), args...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	for _, name := range []string{"cantal-agent", "cantal"} {
		out, code := run(name, "--version")
		if code != 0 || !strings.HasPrefix(out, name+" version ") || !strings.Contains(out, "revision ") || !strings.Contains(out, "go1.") {
			t.Errorf("%s --version = %d, %q; want the version, revision and Go version", name, code, out)
		}
	}
	dir := t.TempDir()
	write := func(name, doc string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(doc), 0o600)
		os.Chmod(p, mode)
		return p
	}
	good := write("good.yml", "listen: 127.0.0.1:1\npeer: [127.0.0.1:2]\ninterval: 1s\n", 0o600)
	if out, code := run("cantal-agent", "--check-config", good); code != 0 || !strings.Contains(out, "configuration OK") {
		t.Errorf("--check-config of a good file = %d, %q; want 0", code, out)
	}
	bad := write("bad.yml", "listen: 127.0.0.1:1\n\ninterval: 1\nbogus: x\n", 0o600)
	if out, code := run("cantal-agent", "--check-config", bad); code != 1 || !strings.Contains(out, bad+":3: interval: want a duration") {
		t.Errorf("--check-config of a wrong type = %d, %q; want 1 and %s:3", code, out, bad)
	}
	unknown := write("unknown.yml", "listen: 127.0.0.1:1\nbogus: secret-value\n", 0o600)
	if out, code := run("cantal-agent", "--config", unknown, "--check-config"); code != 1 || !strings.Contains(out, unknown+`:2: unknown key "bogus"`) || strings.Contains(out, "secret-value") {
		t.Errorf("--check-config of an unknown key = %d, %q; want 1 and %s:2 without the value", code, out, unknown)
	}
	open := write("open.yml", "listen: 127.0.0.1:1\n", 0o646)
	if out, code := run("cantal-agent", "--check-config", open); code != 1 || !strings.Contains(out, "refused: writable by every user") {
		t.Errorf("--check-config of a world-writable file = %d, %q; want 1 and a refusal", code, out)
	}
	// A symbolic link (root's) to a file another user owns is refused, as another user's link
	// to root's good file.
	if os.Geteuid() == 0 {
		theirs := write("theirs.yml", "listen: 127.0.0.1:1\n", 0o644)
		os.Chown(theirs, 65534, 65534)
		link := filepath.Join(dir, "link.yml")
		os.Symlink(theirs, link)
		if out, code := run("cantal-agent", "--check-config", link); code != 1 || !strings.Contains(out, "refused: owned by uid 65534") {
			t.Errorf("--check-config of a link to another user's file = %d, %q; want 1 and a refusal", code, out)
		}
		planted := filepath.Join(dir, "planted.yml")
		os.Symlink(good, planted)
		os.Lchown(planted, 65534, 65534)
		if out, code := run("cantal-agent", "--check-config", planted); code != 1 || !strings.Contains(out, "is owned by uid 65534") {
			t.Errorf("--check-config through another user's link = %d, %q; want 1 and a refusal", code, out)
		}
	}
	// A start with the refused file stops before listening.
	if out, code := run("cantal-agent", "--config", open); code != 2 || !strings.Contains(out, "refused") {
		t.Errorf("a start with a world-writable --config = %d, %q; want 2 and a refusal", code, out)
	}
}
