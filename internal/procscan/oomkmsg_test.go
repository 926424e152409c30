package procscan

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseKmsgOOM(t *testing.T) {
	const id = "/docker/0123456789abcdef"
	for _, c := range []struct {
		line, want string
		ok         bool
	}{
		{"3,1043,2783154321,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=" + id + ",task_memcg=" + id + ",task=ctrapp,pid=4242,uid=0", id, true},
		{"6,7,1,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/x.service,task=x,pid=1,uid=0", "", false},
		{"6,7,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/,task_memcg=/a/b,task=x,pid=1,uid=0", "/a/b", true},
		// a record a process wrote (user facility): not the kernel's
		{"14,1044,2783154322,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=" + id + ",task_memcg=" + id + ",task=x,pid=1,uid=0", "", false},
		// a container's nested cgroups named to make the line say another container's
		{"3,1,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/docker/A/x,task_memcg=/docker/B,task_memcg=/docker/A/x,task_memcg=/docker/B,task=y,pid=2,uid=0", "/docker/A/x,task_memcg=/docker/B", true},
		{"3,1,1,-;Memory cgroup out of memory: Killed process 1 (x)", "", false},
		{" SUBSYSTEM=memory", "", false},
		{"", "", false},
	} {
		got, ok := parseKmsgOOM([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("parseKmsgOOM(%q) = %q, %v; want %q, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// A container OOM-killed after one scan and gone before the next (its cgroup removed with it)
// still has its kill counted: the kernel's log names its cgroup, and its oom_kill series is
// written once more, one higher. A kill its own files counted is not counted twice, and a
// record a process wrote (user facility) is not counted.
func TestOOMKillOfGoneContainer(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	p := resTree(t, true)
	events := filepath.Join(p.opt.Sys, "fs/cgroup/unified/docker", id, "memory.events")
	os.WriteFile(events, []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 0o644)
	kmsg := filepath.Join(t.TempDir(), "kmsg")
	os.WriteFile(kmsg, nil, 0o600)
	p.opt.Kmsg = kmsg
	p.cg.opt.Kmsg = kmsg
	log := func(lines ...string) {
		f, err := os.OpenFile(kmsg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			f.WriteString(l + "\n")
		}
		f.Close()
	}
	rec := func(facility string) string {
		return facility + ",1043,2783154321,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/docker/" + id + ",task_memcg=/docker/" + id + ",task=ctrapp,pid=4242,uid=0"
	}
	b, _ := json.Marshal(series.Labels{"metric": "cgroup.memory.oom_kill", "cgroup": "docker." + id,
		"container": "web-1", "container_id": id[:12], "image": "shop:1"})
	key := string(b)
	scan := func() *series.Recorder {
		r := series.NewRecorder()
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	scan()
	if r := scan(); r.Values[key] != 1 {
		t.Fatalf("oom_kill = %d; want 1 (memory.events)", r.Values[key])
	}
	// A kill logged before the scan reads the files, which count it: 2, not 3.
	log(rec("3"))
	os.WriteFile(events, []byte("oom 2\noom_kill 2\n"), 0o644)
	if r := scan(); r.Values[key] != 2 {
		t.Fatalf("oom_kill = %d; want 2", r.Values[key])
	}
	// Killed after that scan, then gone: the process and the cgroup.
	log(rec("3"), rec("14"))
	os.RemoveAll(filepath.Join(p.opt.Proc, "4242"))
	os.RemoveAll(filepath.Dir(events))
	r := scan()
	if v, ok := r.Values[key]; !ok || v != 3 {
		t.Errorf("the gone container's oom_kill = %d, %v; want 3", v, ok)
	}
	// Gone, killed once more before it went (a last process): logged after, counted.
	log(rec("4"))
	if r := scan(); r.Values[key] != 4 {
		t.Errorf("oom_kill = %d; want 4", r.Values[key])
	}
	// Nothing more logged: the series goes on being 4 for a while, then ends.
	for range tombScans + 1 {
		r = scan()
	}
	if v, ok := r.Values[key]; ok {
		t.Errorf("a gone container's oom_kill still written after %d scans: %d", tombScans+1, v)
	}
}
