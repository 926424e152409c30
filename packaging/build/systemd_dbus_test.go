package build

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// systemdFamilies are the node_systemd_* families the agent's --systemd has.
var systemdFamilies = []string{"node_systemd_unit_state", "node_systemd_units", "node_systemd_system_running", "node_systemd_version"}

// scrapeSystemd GETs url and returns its node_systemd_* series as "family{labels}" → value,
// labels sorted, empty ones left out (as Prometheus stores them).
func scrapeSystemd(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, name := range systemdFamilies {
		f := fams[name]
		if f == nil {
			return nil, fmt.Errorf("%s: no %s", url, name)
		}
		if f.GetType() != dto.MetricType_GAUGE {
			return nil, fmt.Errorf("%s: %s is %v", url, name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				if l.GetValue() != "" {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
			}
			sort.Strings(ls)
			out[name+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// TestSystemdUnitsBesideNodeExporter boots the Debian root under systemd-nspawn -b (a real
// systemd as its PID 1, with dbus), then runs node_exporter 1.5 --collector.systemd and the
// agent --systemd on the host, both told the container's system bus by DBUS_SYSTEM_BUS_ADDRESS
// (through /proc/PID/root: the container's /run is its own): the node_systemd_* families have
// the same series and values on both, a unit the test starts and one it makes fail included.
func TestSystemdUnitsBesideNodeExporter(t *testing.T) {
	ne := need(t, "prometheus-node-exporter")
	root := debianRoot(t)
	// Two units of the test's: one that stays active, one that fails.
	for name, unit := range map[string]string{
		"cantal-sleeper.service": "[Service]\nType=simple\nExecStart=/bin/sleep infinity\n",
		"cantal-broken.service":  "[Service]\nType=oneshot\nExecStart=/bin/false\n",
	} {
		if err := os.WriteFile(root+"/etc/systemd/system/"+name, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := boot(t, root)
	b.must("systemctl", "start", "cantal-sleeper.service")
	b.in("systemctl", "start", "cantal-broken.service") // fails, as meant
	bus := "unix:path=/proc/" + strconv.Itoa(b.systemd) + "/root/run/dbus/system_bus_socket"
	env := append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+bus)

	nePort := freePort(t)
	neCmd := exec.Command(ne, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nePort), "--log.level=warn",
		"--collector.disable-defaults", "--collector.systemd")
	agentAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	agentCmd := exec.Command(agentBinary(t), "--listen", agentAddr, "--interval", "500ms", "--state-dir", "",
		"--rrdd-dir", t.TempDir(), "--no-bpf", "--metrics-no-timestamps", "--systemd")
	var logs bytes.Buffer
	for _, c := range []*exec.Cmd{neCmd, agentCmd} {
		c.Env, c.Stdout, c.Stderr = env, &logs, &logs
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}

	var diff string
	until(t, "the same node_systemd_* on both", 60*time.Second, func() (bool, string) {
		nv, err := scrapeSystemd(fmt.Sprintf("http://127.0.0.1:%d/metrics", nePort))
		if err != nil {
			return false, err.Error() + "\n" + logs.String()
		}
		av, err := scrapeSystemd("http://" + agentAddr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		var d []string
		for k, v := range nv {
			if w, ok := av[k]; !ok || math.Abs(w-v) > 1e-9 {
				d = append(d, fmt.Sprintf("%s: node_exporter %v, agent %v (%v)", k, v, w, ok))
			}
		}
		for k, w := range av {
			if _, ok := nv[k]; !ok {
				d = append(d, fmt.Sprintf("%s: agent %v, not on node_exporter", k, w))
			}
		}
		sort.Strings(d)
		diff = strings.Join(d, "\n")
		if diff != "" {
			return false, diff
		}
		// The test's units are there, as systemd has them.
		for k, want := range map[string]float64{
			"node_systemd_unit_state{name=cantal-sleeper.service,state=active,type=simple}": 1,
			"node_systemd_unit_state{name=cantal-broken.service,state=failed,type=oneshot}": 1,
			"node_systemd_system_running{}": 0, // degraded: a unit failed
		} {
			if v, ok := nv[k]; !ok || v != want {
				return false, fmt.Sprintf("%s = %v (%v), want %v", k, v, ok, want)
			}
		}
		t.Logf("%d node_systemd_* series, equal on both", len(nv))
		return true, ""
	})
}
