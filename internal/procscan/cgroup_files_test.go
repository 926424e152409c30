package procscan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// memLimit is the cgroup.memory.limit of the recorder's only cgroup, and whether it has one.
func memLimit(r *series.Recorder) (uint64, bool) {
	for k, v := range r.Values {
		var l map[string]string
		if json.Unmarshal([]byte(k), &l) == nil && l["metric"] == "cgroup.memory.limit" {
			return v, true
		}
	}
	return 0, false
}

// A cgroup's files are kept open between scans and closed when the cgroup has no process
// left; a cgroup removed and made again under the same path (a container restarted with the
// same id) is read afresh at the next scan: its new limit, not the old one kept for
// cgRareEvery scans, and no problem for the kept files of the removed one (ENODEV). On the
// kernel's own cgroupfs (the machine's v1 memory hierarchy), with a fixture /proc whose
// process is in it.
func TestCgroupFilesKeptAndRecreated(t *testing.T) {
	mem := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(mem, "memory.limit_in_bytes")); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and a v1 memory hierarchy at /sys/fs/cgroup/memory") // the suite's machine has both
	}
	name := fmt.Sprintf("cantal-test-%d", os.Getpid())
	dir := filepath.Join(mem, name)
	mk := func(limit int) {
		t.Helper()
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(fmt.Sprint(limit)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(64 << 20)
	t.Cleanup(func() { os.Remove(dir) })
	proc := copyTree(t, "testdata/proc")
	if err := os.WriteFile(filepath.Join(proc, "4242/cgroup"), []byte("4:memory:/"+name+"\n0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := NewProcesses(Options{Proc: proc, Sys: "/sys", PageSize: 4096, NoTaskIter: true})
	defer p.Close()
	collect := func() *series.Recorder {
		t.Helper()
		r := series.NewRecorder()
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if len(r.Problems) > 0 {
			t.Errorf("problems: %v", r.Problems)
		}
		return r
	}
	collect()
	if v, ok := memLimit(collect()); !ok || v != 64<<20 {
		t.Fatalf("limit %d, %v; want %d", v, ok, 64<<20)
	}
	// usage_in_bytes, oom_control and memory.stat are kept; the limit is not.
	if p.cg.kept != 3 {
		t.Errorf("%d cgroup files kept open; want 3", p.cg.kept)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mk(32 << 20)
	if v, ok := memLimit(collect()); !ok || v != 32<<20 {
		t.Errorf("after the cgroup was made again: limit %d, %v; want the new one, %d", v, ok, 32<<20)
	}
	if p.cg.kept != 3 {
		t.Errorf("%d cgroup files kept open after it was made again; want 3", p.cg.kept)
	}
	if err := os.RemoveAll(filepath.Join(proc, "4242")); err != nil {
		t.Fatal(err)
	}
	collect()
	if p.cg.kept != 0 {
		t.Errorf("%d cgroup files still open after the cgroup's last process went; want 0", p.cg.kept)
	}
}

// A v2 cgroup's memory.events is read again only when the kernel notified it (inotify): a
// scan after it changed shows the new oom and oom_kill counts, and scans without a change
// read it no more.
func TestMemoryEventsReadWhenNotified(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	p := resTree(t, true)
	events := filepath.Join(p.opt.Sys, "fs/cgroup/unified/docker", id, "memory.events")
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := func(metric string) string {
		b, _ := json.Marshal(series.Labels{"metric": metric, "cgroup": "docker." + id,
			"container": "web-1", "container_id": id[:12], "image": "shop:1"})
		return string(b)
	}
	scan := func() *series.Recorder {
		t.Helper()
		r := series.NewRecorder()
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for range 3 {
		scan()
	}
	cs := p.cg.byName["docker."+id]
	if !cs.ev.on || cs.ev.dirty {
		t.Fatalf("memory.events watched %v, to be read %v after scans without a change; want watched, not read", cs.ev.on, cs.ev.dirty)
	}
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 9\noom 5\noom_kill 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := scan()
	if r.Values[key("cgroup.memory.oom")] != 5 || r.Values[key("cgroup.memory.oom_kill")] != 4 {
		t.Errorf("after memory.events changed: oom %d, oom_kill %d; want 5, 4",
			r.Values[key("cgroup.memory.oom")], r.Values[key("cgroup.memory.oom_kill")])
	}
	r = scan() // unchanged: its latest figures again
	if r.Values[key("cgroup.memory.oom")] != 5 || r.Values[key("cgroup.memory.oom_kill")] != 4 {
		t.Errorf("a scan after: oom %d, oom_kill %d; want 5, 4",
			r.Values[key("cgroup.memory.oom")], r.Values[key("cgroup.memory.oom_kill")])
	}
}

// Beyond Options.CgroupKeepOpen a cgroup's files are opened, read and closed at each scan,
// with the same figures.
func TestCgroupFilesBeyondBudget(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	p := resTree(t, true)
	p.cg.opt.CgroupKeepOpen = 0
	pids := filepath.Join(p.opt.Sys, "fs/cgroup/unified/docker", id, "pids.current")
	b, _ := json.Marshal(series.Labels{"metric": "cgroup.pids", "cgroup": "docker." + id,
		"container": "web-1", "container_id": id[:12], "image": "shop:1"})
	for i := range 3 {
		os.WriteFile(pids, []byte(fmt.Sprintln(7+i)), 0o644)
		r := series.NewRecorder()
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got := r.Values[string(b)]; got != uint64(7+i) {
			t.Errorf("scan %d: cgroup.pids = %d; want %d", i, got, 7+i)
		}
		if p.cg.kept != 0 {
			t.Errorf("%d files kept open with a budget of none", p.cg.kept)
		}
	}
}
