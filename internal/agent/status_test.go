package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/procscan"
)

// TestProcessRowsVisibleAndRedacted: /api/v1/processes shows a caller the processes it may see, with
// command lines redacted unless --show-cmdlines, and never changes the shared process table.
//
// Security finding 12.
func TestProcessRowsVisibleAndRedacted(t *testing.T) {
	secret := []string{"/usr/bin/app", "--db-password=hunter2", "--port", "5432"}
	table := []procscan.Process{
		{PID: 1, UID: 0, Name: "init", Cmdline: []string{"/sbin/init"}},
		{PID: 100, UID: 1000, Name: "app", Cmdline: secret, CantalAppName: "mine"},
		{PID: 200, UID: 2000, Name: "db", Cmdline: []string{"postgres", "-D", "/var/lib/pg"}, CantalAppName: "theirs"},
		{PID: 2, UID: 0, Name: "kthreadd"}, // no command line
	}
	exports := func(pid int) bool { return pid == 100 }
	pids := func(rows []apiwire.Process) []int {
		var out []int
		for _, r := range rows {
			out = append(out, r.PID)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		caller access.Caller
		want   []int
	}{
		{"all", access.Caller{Processes: access.ProcessesAll}, []int{1, 100, 200, 2}},
		{"own", access.Caller{Processes: access.ProcessesOwn, UID: 1000}, []int{100}},
		{"own root", access.Caller{Processes: access.ProcessesOwn, UID: 0}, []int{1, 2}},
		{"none", access.Caller{Processes: access.ProcessesNone}, nil},
	} {
		rows := processRows(table, tc.caller, false, exports)
		if got := pids(rows); !slices.Equal(got, tc.want) {
			t.Errorf("%s: pids %v; want %v", tc.name, got, tc.want)
		}
		if rows == nil {
			t.Errorf("%s: nil rows; want an empty list (JSON [])", tc.name)
		}
		for _, r := range rows {
			if r.Cmdline == nil {
				t.Errorf("%s: pid %d has a nil command line; want []", tc.name, r.PID)
			}
			if r.PID == 100 && (!r.Metrics || r.AppName != "mine") {
				t.Errorf("%s: pid 100 = %+v; want its appname and metrics", tc.name, r)
			}
		}
	}
	rows := processRows(table, access.Caller{Processes: access.ProcessesAll}, false, exports)
	if want := []string{"/usr/bin/app", "--db-password=***", "--port", "5432"}; !slices.Equal(rows[1].Cmdline, want) {
		t.Errorf("redacted command line %q; want %q", rows[1].Cmdline, want)
	}
	if !slices.Equal(rows[2].Cmdline, table[2].Cmdline) {
		t.Errorf("command line with nothing to hide became %q", rows[2].Cmdline)
	}
	if secret[1] != "--db-password=hunter2" {
		t.Errorf("the process table's command line was changed to %q", secret)
	}
	rows = processRows(table, access.Caller{Processes: access.ProcessesAll}, true, exports)
	if !slices.Equal(rows[1].Cmdline, secret) {
		t.Errorf("with --show-cmdlines: %q; want %q", rows[1].Cmdline, secret)
	}
}

// A local user without hidepid sees every process's row, but another user's without its io
// counters and environment-derived application name (as /proc/PID/io and environ). (N13)
func TestProcessRowsHideOthersPrivateDetails(t *testing.T) {
	table := []procscan.Process{
		{PID: 100, UID: 1000, Name: "app", ReadBytes: 11, WriteBytes: 12, CantalAppName: "mine", CantalPath: "/run/mine"},
		{PID: 200, UID: 2000, Name: "db", ReadBytes: 21, WriteBytes: 22, CantalAppName: "theirs", CantalPath: "/run/theirs"},
	}
	exports := func(int) bool { return true }
	user := access.Caller{Unix: true, UID: 1000, Processes: access.ProcessesAll, Details: access.ProcessesOwn}
	rows := processRows(table, user, false, exports)
	if len(rows) != 2 {
		t.Fatalf("%d rows; want both processes", len(rows))
	}
	if r := rows[0]; r.ReadBytes != 11 || r.AppName != "mine" || !r.Metrics {
		t.Errorf("own process %+v; want its io and appname", r)
	}
	if r := rows[1]; r.ReadBytes != 0 || r.WriteBytes != 0 || r.AppName != "" || r.Metrics {
		t.Errorf("another user's process %+v; want no io, appname or metrics flag", r)
	}
}

// The process and application counts of the status count only what the caller may see. (N14)
func TestVisibleCounts(t *testing.T) {
	table := []procscan.Process{
		{PID: 1, UID: 0, CantalPath: "/run/a"},
		{PID: 100, UID: 1000, CantalPath: "/run/b"},
		{PID: 101, UID: 1000, CantalPath: "/run/b"}, // the same application
		{PID: 200, UID: 2000, CantalPath: "/run/c"},
		{PID: 201, UID: 2000},
	}
	exports := func(pid int) bool { return pid != 201 }
	for _, c := range []struct {
		name        string
		caller      access.Caller
		procs, apps int
	}{
		{"own", access.Caller{UID: 1000, Processes: access.ProcessesOwn, Details: access.ProcessesOwn}, 2, 1},
		{"none", access.Caller{Processes: access.ProcessesNone}, 0, 0},
		{"details own", access.Caller{UID: 1000, Processes: access.ProcessesAll, Details: access.ProcessesOwn}, 5, 1},
		{"all", access.Caller{Processes: access.ProcessesAll}, 5, 3},
	} {
		if p, a := visibleCounts(table, c.caller, exports); p != c.procs || a != c.apps {
			t.Errorf("%s: %d processes, %d apps; want %d, %d", c.name, p, a, c.procs, c.apps)
		}
	}
}

// TestTopProcesses: sort=cpu|rss orders the largest first (ties by pid) and limit keeps the
// first rows; no sort keeps the table's order.
func TestTopProcesses(t *testing.T) {
	rows := func() []apiwire.Process {
		return []apiwire.Process{{PID: 5, CPUPercent: 1, RSS: 50}, {PID: 2, CPUPercent: 9, RSS: 10}, {PID: 9, CPUPercent: 9, RSS: 90}, {PID: 1, CPUPercent: 0, RSS: 70}}
	}
	pids := func(rs []apiwire.Process) []int {
		var out []int
		for _, r := range rs {
			out = append(out, r.PID)
		}
		return out
	}
	for _, tc := range []struct {
		q    api.ProcessQuery
		want []int
	}{
		{api.ProcessQuery{}, []int{5, 2, 9, 1}},
		{api.ProcessQuery{Sort: "cpu"}, []int{2, 9, 5, 1}},
		{api.ProcessQuery{Sort: "cpu", Limit: 2}, []int{2, 9}},
		{api.ProcessQuery{Sort: "rss", Limit: 3}, []int{9, 1, 5}},
		{api.ProcessQuery{Limit: 10}, []int{5, 2, 9, 1}},
	} {
		if got := pids(topProcesses(rows(), tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: pids %v; want %v", tc.q, got, tc.want)
		}
	}
}

// TestHostUptime: the first field of proc's uptime file; 0 when missing or garbled.
func TestHostUptime(t *testing.T) {
	dir := t.TempDir()
	if v := hostUptime(dir); v != 0 {
		t.Errorf("no uptime file: %v; want 0", v)
	}
	os.WriteFile(filepath.Join(dir, "uptime"), []byte("12345.67 2345.10\n"), 0o644)
	if v := hostUptime(dir); v != 12345.67 {
		t.Errorf("uptime %v; want 12345.67", v)
	}
	os.WriteFile(filepath.Join(dir, "uptime"), []byte("x y\n"), 0o644)
	if v := hostUptime(dir); v != 0 {
		t.Errorf("garbled uptime: %v; want 0", v)
	}
}
