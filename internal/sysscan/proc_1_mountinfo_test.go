package sysscan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

func fsKey(metric, device, mp, fstype string) string {
	return series.Labels{"metric": metric, "device": device, "mountpoint": mp, "fstype": fstype}.Key()
}

// fakeStatfs answers statfs from a table; a path listed in block waits until its channel is
// closed.
type fakeStatfs struct {
	mu    sync.Mutex
	block map[string]chan struct{}
	calls map[string]int
	inFly atomic.Int32
	most  atomic.Int32
}

func (f *fakeStatfs) statfs(path string, st *unix.Statfs_t) error {
	f.mu.Lock()
	f.calls[path]++
	ch := f.block[path]
	f.mu.Unlock()
	n := f.inFly.Add(1)
	defer f.inFly.Add(-1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	if ch != nil {
		<-ch
	}
	if path == "/mnt/nfs" {
		return unix.EIO
	}
	*st = unix.Statfs_t{Bsize: 4096, Blocks: 1000, Bfree: 600, Bavail: 500, Files: 100, Ffree: 40}
	return nil
}

func TestFilesystemsFixture(t *testing.T) {
	fake := &fakeStatfs{block: map[string]chan struct{}{}, calls: map[string]int{}}
	f := NewFilesystems(Options{Proc: "testdata/fsproc"}, FSOptions{Statfs: fake.statfs})
	defer f.Close()
	r := series.NewRecorder()
	if err := f.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		fsKey("fs.size", "/dev/vda1", "/", "ext4"):                     4096 * 1000,
		fsKey("fs.free", "/dev/vda1", "/", "ext4"):                     4096 * 600,
		fsKey("fs.avail", "/dev/vda1", "/", "ext4"):                    4096 * 500,
		fsKey("fs.files", "/dev/vda1", "/", "ext4"):                    100,
		fsKey("fs.files_free", "/dev/vda1", "/", "ext4"):               40,
		fsKey("fs.readonly", "/dev/vda1", "/", "ext4"):                 0,
		fsKey("fs.device_error", "/dev/vda1", "/", "ext4"):             0,
		fsKey("fs.readonly", "/dev/vdb", "/srv/my data", "xfs"):        1,
		fsKey("fs.avail", "/dev/vdb", "/srv/my data", "xfs"):           4096 * 500,
		fsKey("fs.device_error", "server:/export", "/mnt/nfs", "nfs4"): 1,
		fsKey("fs.readonly", "server:/export", "/mnt/nfs", "nfs4"):     0,
	}
	for k, v := range want {
		if got, ok := r.Values[k]; !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	// measured: /, /run, /srv/my data (7 series each), /mnt/nfs (readonly and device_error);
	// excluded: /proc, /sys, /dev (path and type), docker's overlay, systemd's credentials
	mps := map[string]int{}
	for k := range r.Values {
		mps[r.Refs()[k].Labels["mountpoint"]]++
	}
	if want := map[string]int{"/": 7, "/run": 7, "/srv/my data": 7, "/mnt/nfs": 2}; !reflect.DeepEqual(mps, want) {
		t.Errorf("series per mount point %v, want %v", mps, want)
	}
	if _, ok := r.Values[fsKey("fs.size", "server:/export", "/mnt/nfs", "nfs4")]; ok {
		t.Errorf("size of a mount whose statfs failed")
	}
	if len(r.Problems["/mnt/nfs"]) != 1 {
		t.Errorf("problems: %v", r.Problems)
	}
	if fake.calls["/srv/my data"] != 1 {
		t.Errorf("the mount listed twice was measured %d times", fake.calls["/srv/my data"])
	}
}

func TestFilesystemsExcludeFlags(t *testing.T) {
	fake := &fakeStatfs{block: map[string]chan struct{}{}, calls: map[string]int{}}
	f := NewFilesystems(Options{Proc: "testdata/fsproc"}, FSOptions{
		Statfs:             fake.statfs,
		MountPointsExclude: regexp.MustCompile(`^/srv/`),
		TypesExclude:       regexp.MustCompile(`^nfs4$`),
	})
	defer f.Close()
	r := series.NewRecorder()
	if err := f.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mps := map[string]bool{}
	for k := range r.Values {
		mps[r.Refs()[k].Labels["mountpoint"]] = true
	}
	for _, mp := range []string{"/", "/run", "/proc", "/sys", "/dev", "/var/lib/docker/overlay2/abc/merged", "/run/credentials/systemd-sysusers.service"} {
		if !mps[mp] {
			t.Errorf("%s not measured with the default exclusions replaced", mp)
		}
	}
	if mps["/srv/my data"] || mps["/mnt/nfs"] {
		t.Errorf("excluded mounts measured: %v", mps)
	}
}

// TestFilesystemsStuckMount: a statfs that does not return marks its mount device_error 1 at
// the deadline, the scan goes on, the mount is skipped (no second call) until the call returns,
// then it is measured again.
func TestFilesystemsStuckMount(t *testing.T) {
	release := make(chan struct{})
	fake := &fakeStatfs{block: map[string]chan struct{}{"/": release}, calls: map[string]int{}}
	f := NewFilesystems(Options{Proc: "testdata/fsproc"}, FSOptions{Statfs: fake.statfs, Timeout: 50 * time.Millisecond})
	defer f.Close()
	root := func(m string) string { return fsKey(m, "/dev/vda1", "/", "ext4") }
	for scan := 1; scan <= 3; scan++ {
		r := series.NewRecorder()
		if err := f.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if r.Values[root("fs.device_error")] != 1 {
			t.Errorf("scan %d: device_error %d, want 1", scan, r.Values[root("fs.device_error")])
		}
		if _, ok := r.Values[root("fs.avail")]; ok {
			t.Errorf("scan %d: avail of a stuck mount", scan)
		}
		if r.Values[fsKey("fs.avail", "/dev/vdb", "/srv/my data", "xfs")] != 4096*500 {
			t.Errorf("scan %d: the other mounts were not measured", scan)
		}
		if len(r.Problems["/"]) != 1 {
			t.Errorf("scan %d: problems %v", scan, r.Problems)
		}
	}
	fake.mu.Lock()
	calls := fake.calls["/"]
	fake.mu.Unlock()
	if calls != 1 {
		t.Errorf("%d statfs calls on the stuck mount, want 1", calls)
	}
	close(release)
	// the stuck call returns; wait for its result to be queued
	for fake.inFly.Load() != 0 {
		time.Sleep(time.Millisecond)
	}
	r := series.NewRecorder()
	if err := f.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.Values[root("fs.device_error")] != 0 || r.Values[root("fs.avail")] != 4096*500 {
		t.Errorf("after release: device_error %d avail %d", r.Values[root("fs.device_error")], r.Values[root("fs.avail")])
	}
	if m := fake.most.Load(); m > 3 { // /, /srv/my data and /mnt/nfs each at most once
		t.Errorf("%d statfs calls in flight at once", m)
	}
}

// TestFilesystemsVanish: series of an unmounted file system stop and its goroutine ends.
func TestFilesystemsVanish(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := writeFile(dir+"/1/mountinfo", s); err != nil {
			t.Fatal(err)
		}
	}
	write("22 1 254:1 / / rw - ext4 /dev/vda1 rw\n27 22 254:2 / /data rw - xfs /dev/vdb rw\n")
	fake := &fakeStatfs{block: map[string]chan struct{}{}, calls: map[string]int{}}
	f := NewFilesystems(Options{Proc: dir}, FSOptions{Statfs: fake.statfs})
	defer f.Close()
	r := series.NewRecorder()
	f.Collect(context.Background(), r)
	if len(f.mounts) != 2 {
		t.Fatalf("%d mounts", len(f.mounts))
	}
	write("22 1 254:1 / / rw - ext4 /dev/vda1 rw\n")
	r = series.NewRecorder()
	f.Collect(context.Background(), r)
	if len(f.mounts) != 1 {
		t.Errorf("%d mounts after unmount", len(f.mounts))
	}
	for k := range r.Values {
		if strings.Contains(k, "/data") {
			t.Errorf("%s written after unmount", k)
		}
	}
}

// TestFilesystemsMatchDf compares the collector's numbers for the real mounts with df's.
func TestFilesystemsMatchDf(t *testing.T) {
	f := NewFilesystems(Options{}, FSOptions{})
	defer f.Close()
	r := series.NewRecorder()
	if err := f.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("df", "-B1", "--output=target,fstype,size,used,avail,itotal,iavail", "-a").Output()
	if err != nil {
		t.Fatalf("df: %v", err)
	}
	type dfRow struct{ size, used, avail, itotal, iavail int64 }
	df := map[string]dfRow{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		fs := strings.Fields(line)
		if len(fs) != 7 {
			continue // a mount point with spaces
		}
		var v [5]int64
		ok := true
		for i := range v {
			if v[i], err = strconv.ParseInt(fs[2+i], 10, 64); err != nil {
				ok = false
			}
		}
		if ok {
			df[fs[0]] = dfRow{v[0], v[1], v[2], v[3], v[4]}
		}
	}
	checked := 0
	for k, ref := range r.Refs() {
		l := ref.Labels
		if l["metric"] != "fs.size" {
			continue
		}
		d, ok := df[l["mountpoint"]]
		if !ok {
			t.Errorf("%s: not listed by df", l["mountpoint"])
			continue
		}
		get := func(m string) int64 {
			return int64(r.Values[fsKey(m, l["device"], l["mountpoint"], l["fstype"])])
		}
		size, free, avail := int64(r.Values[k]), get("fs.free"), get("fs.avail")
		// df's size is f_blocks×f_frsize, used (f_blocks−f_bfree)×f_frsize; f_frsize is f_bsize
		// on Linux file systems. Space moves between the two reads: allow 64 MiB.
		const slack = 64 << 20
		if size != d.size {
			t.Errorf("%s: size %d, df %d", l["mountpoint"], size, d.size)
		}
		if diff := (size - free) - d.used; diff > slack || diff < -slack {
			t.Errorf("%s: used %d, df %d", l["mountpoint"], size-free, d.used)
		}
		if diff := avail - d.avail; diff > slack || diff < -slack {
			t.Errorf("%s: avail %d, df %d", l["mountpoint"], avail, d.avail)
		}
		if files := get("fs.files"); files != d.itotal {
			t.Errorf("%s: files %d, df %d", l["mountpoint"], files, d.itotal)
		}
		if diff := get("fs.files_free") - d.iavail; diff > 10000 || diff < -10000 {
			t.Errorf("%s: files_free %d, df %d", l["mountpoint"], get("fs.files_free"), d.iavail)
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("no file system measured; df said:\n%s", out)
	}
	t.Logf("%d file systems compared with df", checked)
}

func writeFile(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// TestFilesystemsNoticesMounts: with mountinfo re-read only when poll(2) reports a change, a
// mount made between two scans is measured at the next scan, and its series stop after it is
// unmounted. It mounts a tmpfs (the tests run as root).
func TestFilesystemsNoticesMounts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := NewFilesystems(Options{}, FSOptions{})
	defer f.Close()
	f.self = true // this process's mounts, whatever pid 1's namespace
	has := func() (bool, uint64) {
		r := series.NewRecorder()
		if err := f.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		v, ok := r.Values[fsKey("fs.size", "cantaltest", dir, "tmpfs")]
		return ok, v
	}
	for range 3 {
		if ok, _ := has(); ok {
			t.Fatal("measured before the mount")
		}
	}
	if !f.pollable {
		t.Errorf("procfs mountinfo not recognised as pollable")
	}
	if err := unix.Mount("cantaltest", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount tmpfs (the tests run as root): %v", err)
	}
	mounted := true
	defer func() {
		if mounted {
			unix.Unmount(dir, 0)
		}
	}()
	if ok, v := has(); !ok || v != 4<<20 {
		t.Errorf("after mount: present %v, size %d, want %d", ok, v, 4<<20)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if ok, _ := has(); ok {
		t.Errorf("still measured after unmount")
	}
}
