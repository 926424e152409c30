package procscan

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePIDStat(t *testing.T) {
	s, err := parsePIDStat(readFixture(t, "proc/42/stat"))
	if err != nil {
		t.Fatalf("parsePIDStat: %v", err)
	}
	want := pidStat{Comm: []byte("my (weird) app"), State: 'R', PPID: 1, Flags: 4194560, UTime: 250, STime: 130, Threads: 3,
		StartTicks: 5000, VSize: 104857600, RSSPages: 2560}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("parsePIDStat = %+v; want %+v", s, want)
	}
	s, err = parsePIDStat(readFixture(t, "real/pid_stat"))
	if err != nil || string(s.Comm) != "cat" || s.State != 'R' || s.StartTicks == 0 || s.Threads != 1 {
		t.Errorf("parsePIDStat(real) = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "1 (x", "1 x) R 1", "1 (x) R 1 2 3", "1 (x) RR 1 1 1 0 -1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
		"1 (x) R -5 1 1 0 -1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", "1 (x) R 1 1 1 0 -1 1 1 1 1 1 x 1 1 1 1 1 1 1 1 1 1 1"} {
		if _, err := parsePIDStat([]byte(bad)); err == nil {
			t.Errorf("parsePIDStat(%q) = nil error; want one", bad)
		}
	}
}

func TestParsePIDSchedstat(t *testing.T) {
	s, err := parsePIDSchedstat(readFixture(t, "real/pid_schedstat"))
	if err != nil || s != (pidSchedstat{RunNs: 191756722, Slices: 642}) {
		t.Errorf("parsePIDSchedstat(real) = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "\n", "1 2\n", "1 2 3 4\n", "x 2 3\n", "1 2 y\n", "-1 2 3\n", "99999999999999999999999 0 1\n"} {
		if _, err := parsePIDSchedstat([]byte(bad)); err == nil {
			t.Errorf("parsePIDSchedstat(%q) = nil error; want one", bad)
		}
	}
}

func TestParseSwapsUsed(t *testing.T) {
	for in, want := range map[string]uint64{
		"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n":                                                                        0,
		"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2                               partition\t8388604\t\t0\t\t-2\n": 0,
		"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2 partition 8388604 1024 -2\n/swap\\040file file 1000 12 -3\n\n": 1036,
	} {
		if got, err := parseSwapsUsed([]byte(in)); err != nil || got != want {
			t.Errorf("parseSwapsUsed(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "/dev/sda2 partition 1 1 -2\n", "Filename Type Size Used Priority\n/dev/sda2 partition 1\n",
		"Filename Type Size Used Priority\n/dev/sda2 partition 1 x -2\n",
		"Filename Type Size Used Priority\na p 1 18446744073709551615 -2\nb p 1 1 -2\n"} {
		if _, err := parseSwapsUsed([]byte(bad)); err == nil {
			t.Errorf("parseSwapsUsed(%q) = nil error; want one", bad)
		}
	}
}

func TestParsePIDStatus(t *testing.T) {
	for _, tc := range []struct {
		file string
		want pidStatus
	}{
		{"proc/42/status", pidStatus{UID: 33, Swap: 17 * 1024}},
		{"proc/2/status", pidStatus{UID: 0}},
		{"real/pid_status", pidStatus{UID: 0}},
		{"real/pid1_status", pidStatus{UID: 0}},
	} {
		got, err := parsePIDStatus(readFixture(t, tc.file))
		if err != nil || got != tc.want {
			t.Errorf("parsePIDStatus(%s) = %+v, %v; want %+v", tc.file, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "Name: x\n", "Uid:\tx\t0\n", "Uid:\t0\nVmSwap:\t12 MB\n", "Uid:\t0\nVmSwap:\tx kB\n", "Uid:\t99999999999\n"} {
		if _, err := parsePIDStatus([]byte(bad)); err == nil {
			t.Errorf("parsePIDStatus(%q) = nil error; want one", bad)
		}
	}
}

func TestParsePIDIO(t *testing.T) {
	got, err := parsePIDIO(readFixture(t, "proc/42/io"))
	if want := (pidIO{1 << 20, 2 << 20}); err != nil || got != want {
		t.Errorf("parsePIDIO = %+v, %v; want %+v", got, err, want)
	}
	if _, err := parsePIDIO(readFixture(t, "real/pid_io")); err != nil {
		t.Errorf("parsePIDIO(real): %v", err)
	}
	for _, bad := range []string{"", "read_bytes: 1\n", "read_bytes: 1\nwrite_bytes: x\n"} {
		if _, err := parsePIDIO([]byte(bad)); err == nil {
			t.Errorf("parsePIDIO(%q) = nil error; want one", bad)
		}
	}
}

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\x00", nil},
		{"/sbin/init\x00splash\x00", []string{"/sbin/init", "splash"}},
		{"nginx: worker process", []string{"nginx: worker process"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"bad\xff\x00x", []string{"bad\uFFFD", "x"}},
	} {
		if got := parseCmdline([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("parseCmdline(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseEnviron(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cantalEnv
	}{
		{"", cantalEnv{}},
		{"HOME=/\x00TERM=linux\x00", cantalEnv{}},
		{string(readFixture(t, "proc/42/environ")), cantalEnv{Path: "/run/cantal/nginx", AppName: "web"}},
		{"CANTAL_PATH=", cantalEnv{}},
		{"XCANTAL_PATH=/a\x00CANTAL_PATH=/b", cantalEnv{Path: "/b"}},
		{"CANTAL_APPNAME=\xffx\x00", cantalEnv{AppName: "\uFFFDx"}},
	} {
		if got := parseEnviron([]byte(tc.in)); got != tc.want {
			t.Errorf("parseEnviron(%q) = %+v; want %+v", tc.in, got, tc.want)
		}
	}
}

func TestParseCgroupFile(t *testing.T) {
	ls, err := parseCgroupFile(readFixture(t, "proc/42/cgroup"), nil)
	if err != nil || len(ls) != 4 {
		t.Fatalf("parseCgroupFile = %d, %v", len(ls), err)
	}
	if string(ls[1].Controllers) != "cpu,cpuacct" || string(ls[3].ID) != "0" || string(ls[3].Path) != "/system.slice/nginx.service" {
		t.Errorf("parseCgroupFile = %q", ls)
	}
	if ls, err := parseCgroupFile(readFixture(t, "real/pid_cgroup"), nil); err != nil || len(ls) < 2 {
		t.Errorf("parseCgroupFile(real) = %d, %v", len(ls), err)
	}
	// A path may contain colons.
	ls, err = parseCgroupFile([]byte("0::/a:b\n"), nil)
	if err != nil || string(ls[0].Path) != "/a:b" {
		t.Errorf("parseCgroupFile(colon) = %q, %v", ls, err)
	}
	for _, bad := range []string{"x", "0:/a\n", "x::/a\n", "0::a\n", "0::\n"} {
		if _, err := parseCgroupFile([]byte(bad), nil); err == nil {
			t.Errorf("parseCgroupFile(%q) = nil error; want one", bad)
		}
	}
}

func TestCgroupName(t *testing.T) {
	for _, tc := range []struct{ path, name, dir string }{
		{"/", "", "/"},
		{"/system.slice/nginx.service", "system.nginx", "/system.slice/nginx.service"},
		{"/system.slice/docker-0123abc.scope", "system.docker-0123abc", "/system.slice/docker-0123abc.scope"},
		{"/docker/abc123", "docker.abc123", "/docker/abc123"},
		{"/init.scope", "init", "/init.scope"},
		{"/user.slice/user-1000.slice/session-3.scope", "user", "/user.slice"},
		{"/user.slice", "user", "/user.slice"},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-f00.scope",
			"kubepods.kubepods-burstable.kubepods-burstable-pod1.cri-containerd-f00",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-f00.scope"},
		{"/../../system.slice/x.service", "system.x", "/../../system.slice/x.service"}, // seen from inside a cgroup namespace
		{"/.slice", ".slice", "/.slice"},
		{"/a/user.slice", "a.user", "/a/user.slice"},
	} {
		name, dir := cgroupName([]byte(tc.path))
		if name != tc.name || dir != tc.dir {
			t.Errorf("cgroupName(%q) = %q, %q; want %q, %q", tc.path, name, dir, tc.name, tc.dir)
		}
	}
}

func TestChooseCgroup(t *testing.T) {
	for _, tc := range []struct {
		file string
		want string // chosen path, "" for none
	}{
		{"0::/\n", ""},
		{"0::/a\n", "/a"},
		// Hybrid machine: systemd's trees say root, a runtime put the process in a memory cgroup.
		{"9:name=systemd:/\n4:memory:/process_api/72e9\n2:cpuacct:/\n0::/\n", "/process_api/72e9"},
		{"4:memory:/m\n1:name=systemd:/s\n0::/u\n", "/u"},
		{"4:memory:/m\n1:name=systemd:/s\n0::/\n", "/s"},
		{"5:pids:/p\n3:cpu:/c\n2:cpuacct:/ca\n", "/ca"},
		{"5:pids:/p\n6:blkio:/b\n", "/p"},
		{"3:cpu,cpuacct:/c\n4:memory:/m\n", "/m"},
	} {
		ls, err := parseCgroupFile([]byte(tc.file), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if i := chooseCgroup(ls); i >= 0 {
			got = string(ls[i].Path)
		}
		if got != tc.want {
			t.Errorf("chooseCgroup(%q) = %q; want %q", tc.file, got, tc.want)
		}
	}
}

func TestParseCgroupValues(t *testing.T) {
	kvs, err := parseFlatKeyed([]byte("usage_usec 2500000\nuser_usec 1500000\n\nsystem_usec 1000000\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := lookup(kvs, "user_usec"); !ok || v != 1500000 {
		t.Errorf("lookup(user_usec) = %d, %v", v, ok)
	}
	if _, ok := lookup(kvs, "nope"); ok {
		t.Errorf("lookup(nope) found")
	}
	for _, bad := range []string{"a\n", "a x\n", "a 1 2\n"} {
		if _, err := parseFlatKeyed([]byte(bad), nil); err == nil {
			t.Errorf("parseFlatKeyed(%q) = nil error; want one", bad)
		}
	}
	for _, tc := range []struct {
		in     string
		v      uint64
		ok, er bool
	}{{"123\n", 123, true, false}, {"max\n", 0, false, false}, {"", 0, false, true}, {"-1", 0, false, true}} {
		v, ok, err := parseSingleValue([]byte(tc.in))
		if v != tc.v || ok != tc.ok || (err != nil) != tc.er {
			t.Errorf("parseSingleValue(%q) = %d, %v, %v", tc.in, v, ok, err)
		}
	}
}
