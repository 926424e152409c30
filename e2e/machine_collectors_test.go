package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMachineCollectors: the System and Filesystems collectors' series are served by the JSON
// API like every other series and join the history. The values themselves are compared with
// df, the kernel's files and node_exporter by internal/sysscan's tests and
// TestNodeExporterSideBySide.
func TestMachineCollectors(t *testing.T) {
	quiet(t)
	a := startAgent(t)
	want := []string{
		`fs.avail`, `fs.size`, `fs.files_free`, `fs.device_error`, `fs.readonly`,
		`vmstat.pgfault`, `vmstat.oom_kill`, `vmstat.nr_free_pages`,
		`sockstat.sockets.used`, `sockstat.TCP.inuse`,
		`timex.sync_status`, `timex.offset_s`, `timex.maxerror_s`,
		`system.boot_time_s`, `system.entropy_avail`,
		`{metric="net.interface.up",interface="lo"}`, `{metric="net.interface.mtu",interface="lo"}`,
		`{metric="softnet.processed",cpu="0"}`,
		`system.uname`, `system.os`, `net.interface.info`,
	}
	if _, err := os.Stat("/proc/pressure/io"); err == nil {
		want = append(want, `pressure.io.some_us`, `pressure.cpu.some_us`)
	}
	if _, err := os.Stat("/proc/net/snmp6"); err == nil {
		want = append(want, `net.Ip6.InReceives`)
	}
	if _, err := os.Stat("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil {
		want = append(want, `conntrack.entries`, `conntrack.entries_limit`)
	}
	waitFor(t, 20*time.Second, func() error {
		var missing []string
		for _, sel := range want {
			ss, err := a.series("/api/v1/metrics", sel)
			if err != nil {
				return err
			}
			if len(ss) == 0 {
				missing = append(missing, sel)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not served: %s", strings.Join(missing, ", "))
		}
		return nil
	})
	ss, err := a.series("/api/v1/metrics", `{metric="fs.size",mountpoint="/"}`)
	if err != nil || len(ss) != 1 || num(ss[0].Value) <= 0 {
		t.Fatalf("fs.size of /: %v %v", ss, err)
	}
	for _, s := range mustSeries(t, a, "/api/v1/metrics", "system.uname") {
		if s.Kind != "state" || s.Labels["sysname"] != "Linux" || s.Text == "" {
			t.Errorf("system.uname: %+v", s)
		}
	}
	// History: scans keep adding points to the new series.
	waitFor(t, 20*time.Second, func() error {
		hs, err := a.series("/api/v1/history?window=1m", `{metric="fs.avail",mountpoint="/"}`)
		if err != nil {
			return err
		}
		if len(hs) != 1 || len(hs[0].Points) < 3 {
			return fmt.Errorf("history of fs.avail: %+v", hs)
		}
		return nil
	})
	if hs := mustSeries(t, a, "/api/v1/history?window=1m&fn=rate", "vmstat.pgfault"); len(hs) != 1 || len(hs[0].Points) < 2 {
		t.Errorf("rate history of vmstat.pgfault: %+v", hs)
	}
}

func mustSeries(t *testing.T, a *agent, path, match string) []Series {
	t.Helper()
	ss, err := a.series(path, match)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
