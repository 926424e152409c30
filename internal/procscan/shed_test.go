package procscan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// shedFixture is testdata/proc plus pid 6000: forked and not yet exec'd (PF_FORKNOEXEC in its
// stat flags), naming a CANTAL_PATH.
func shedFixture(t *testing.T) Options {
	t.Helper()
	proc := copyTree(t, "testdata/proc")
	src, dst := filepath.Join(proc, "5000"), filepath.Join(proc, "6000")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(filepath.Join(src, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(strings.Replace(string(stat), "5000", "6000", -1), " 4194560 ", " 4194624 ", 1)
	if !strings.Contains(s, " 4194624 ") {
		t.Fatalf("fixture stat has no flags to change: %q", stat)
	}
	for name, content := range map[string]string{"stat": s, "environ": "CANTAL_PATH=/run/forked\x00"} {
		if err := os.WriteFile(filepath.Join(dst, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opt := fixtureOptions()
	opt.Proc = proc
	return opt
}

func hasProcessSeries(r *series.Recorder, pid string) bool {
	for _, ref := range r.Refs() {
		if ref.Labels["metric"] == "process.cpu.user_ms" && ref.Labels["pid"] == pid {
			return true
		}
	}
	return false
}

func TestProcessesDetailsWaitForSecondScan(t *testing.T) {
	p := NewProcesses(shedFixture(t))
	defer p.Close()
	r := series.NewRecorder()
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	tab := p.Table()
	app, other, forked := findPID(tab, 42), findPID(tab, 5000), findPID(tab, 6000)
	if app == nil || other == nil || forked == nil {
		t.Fatalf("table = %+v", tab)
	}
	// An application's details are read in its first scan; another process's wait.
	if app.CantalPath != "/run/cantal/nginx" || app.UID < 0 || app.Cmdline == nil || app.Cgroup == "" {
		t.Errorf("first scan: application = %+v", app)
	}
	if other.UID != -1 || other.Cmdline != nil || other.Cgroup != "" {
		t.Errorf("first scan: non-application = %+v; want no uid (-1), command line or cgroup yet", other)
	}
	if forked.CantalPath != "" {
		t.Errorf("first scan: the environment of a process that has not exec'd was read: %+v", forked)
	}
	st := p.Stats()
	if st.Scans != 1 || st.SkippedBusy != 1 || st.DeferredDetails != 4 || st.ShedDetails != 0 {
		t.Errorf("after the first scan: %+v; want 1 skipped (6000) and 4 deferred (1, 2, 5000, 6000)", st)
	}
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	tab = p.Table()
	other, forked = findPID(tab, 5000), findPID(tab, 6000)
	if other.UID != 1000 || len(other.Cmdline) == 0 || other.Cgroup == "" {
		t.Errorf("second scan: non-application = %+v", other)
	}
	if forked.CantalPath != "/run/forked" {
		t.Errorf("second scan: the forked process's environment was not read: %+v", forked)
	}
	if !hasProcessSeries(r, "5000") || !hasProcessSeries(r, "42") {
		t.Errorf("no process series after the second scan")
	}
	if k := (series.Labels{"metric": "process_scan.deferred_details"}).Key(); r.Values[k] != 4 {
		t.Errorf("process_scan.deferred_details = %d; want 4", r.Values[k])
	}
}

func TestProcessesShedOverBudget(t *testing.T) {
	p := NewProcesses(shedFixture(t))
	defer p.Close()
	p.SetBudget(1) // 1 ns: every scan is late
	r := series.NewRecorder()
	for range 3 {
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	tab := p.Table()
	app, other := findPID(tab, 42), findPID(tab, 5000)
	if app == nil || other == nil {
		t.Fatalf("table = %+v", tab)
	}
	// The application is never shed: its details and series are there.
	if app.UID < 0 || app.Cmdline == nil || !hasProcessSeries(r, "42") {
		t.Errorf("application = %+v, series %v; its reads were shed", app, hasProcessSeries(r, "42"))
	}
	// The others' details were shed at every scan after the first, so they have none, and no
	// series (their cgroup labels them).
	if other.UID != -1 || other.Cmdline != nil || hasProcessSeries(r, "5000") {
		t.Errorf("non-application = %+v, series %v; want its details shed", other, hasProcessSeries(r, "5000"))
	}
	st := p.Stats()
	// 6000 is an application from its second scan (its environment names a CANTAL_PATH).
	if st.ShedScans != 2 || st.ShedDetails != 6 {
		t.Errorf("stats = %+v; want 2 scans shedding the details of 3 processes (1, 2, 5000) each", st)
	}
	if forked := findPID(tab, 6000); forked.CantalPath != "/run/forked" || forked.UID < 0 {
		t.Errorf("forked application = %+v; its reads were shed", forked)
	}
	if k := (series.Labels{"metric": "process_scan.shed_details"}).Key(); r.Values[k] != 6 {
		t.Errorf("process_scan.shed_details = %d; want 6", r.Values[k])
	}
	// With the budget lifted, the next scan reads them.
	p.SetBudget(0)
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if other = findPID(p.Table(), 5000); other.UID != 1000 || !hasProcessSeries(r, "5000") {
		t.Errorf("after the budget was lifted: %+v", other)
	}
}
