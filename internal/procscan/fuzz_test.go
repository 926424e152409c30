package procscan

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for every parser of outside input. Seeds are the testdata fixtures; run e.g.
//
//	go test -run '^$' -fuzz '^FuzzParsePIDStat$' -fuzztime 1m ./internal/sysscan

func addFixtures(f *testing.F, paths ...string) {
	for _, p := range paths {
		f.Add(readFixture(f, p))
	}
}

func FuzzParsePIDStat(f *testing.F) {
	addFixtures(f, "proc/42/stat", "proc/2/stat", "real/pid_stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parsePIDStat(b)
		if err == nil && len(s.Comm) > len(b) {
			t.Errorf("comm longer than input")
		}
		stateString(byte(len(b)))
	})
}

// FuzzParsePIDSchedstat also fuzzes parseSwapsUsed and parsePagesTaken (the scan's reads of
// /proc/swaps and /proc/vmstat).
func FuzzParsePIDSchedstat(f *testing.F) {
	addFixtures(f, "real/pid_schedstat", "proc/42/stat", "proc/vmstat")
	f.Add([]byte("0 0 0\n"))
	f.Add([]byte("Filename Type Size Used Priority\n/dev/sda2 partition 8388604 1024 -2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseSwapsUsed(b)
		parsePagesTaken(b)
		s, err := parsePIDSchedstat(b)
		if err == nil && s.Slices > 0 && len(b) < 5 {
			t.Errorf("%q parsed as %+v from fewer than three fields", b, s)
		}
	})
}

func FuzzParsePIDStatus(f *testing.F) {
	addFixtures(f, "proc/42/status", "proc/2/status", "real/pid_status", "real/pid1_status")
	f.Fuzz(func(t *testing.T, b []byte) {
		parsePIDStatus(b)
		parsePIDIO(b)
	})
}

func FuzzParseEnviron(f *testing.F) {
	addFixtures(f, "proc/42/environ", "proc/1/environ", "proc/42/cmdline", "proc/1/cmdline")
	f.Fuzz(func(t *testing.T, b []byte) {
		e := parseEnviron(b)
		if !utf8.ValidString(e.Path) || !utf8.ValidString(e.AppName) {
			t.Errorf("invalid UTF-8 in %+v", e)
		}
		if e.Path != "" && !bytes.Contains(b, []byte("CANTAL_PATH=")) {
			t.Errorf("CANTAL_PATH %q from nowhere", e.Path)
		}
		for _, a := range parseCmdline(b) {
			if !utf8.ValidString(a) || strings.IndexByte(a, 0) >= 0 {
				t.Errorf("bad cmdline element %q", a)
			}
		}
	})
}

func FuzzParseCgroup(f *testing.F) {
	addFixtures(f, "proc/1/cgroup", "proc/42/cgroup", "proc/4242/cgroup", "proc/5000/cgroup", "real/pid_cgroup")
	f.Add([]byte("0::/../x.slice/y.scope\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := parseCgroupFile(b, nil)
		parseFlatKeyed(b, nil)
		parseSingleValue(b)
		if err != nil {
			return
		}
		i := chooseCgroup(ls)
		if i < -1 || i >= len(ls) {
			t.Fatalf("chooseCgroup = %d of %d", i, len(ls))
		}
		for _, l := range ls {
			name, dir := cgroupName(l.Path)
			if !utf8.ValidString(name) {
				t.Errorf("cgroupName(%q) = %q: invalid UTF-8", l.Path, name)
			}
			if (name == "") != (dir == "/") {
				t.Errorf("cgroupName(%q) = %q, %q", l.Path, name, dir)
			}
		}
	})
}

func FuzzParseIOStat(f *testing.F) {
	f.Add([]byte("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n253:1 rbytes=0 wbytes=512 rios=0 wios=1 dbytes=0 dios=0\n"))
	f.Add([]byte("8:0 Read 4096\n8:0 Write 8192\n8:0 Total 12288\nTotal 12288\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		for _, parse := range []func([]byte, []ioDev) ([]ioDev, error){
			parseIOStat,
			func(b []byte, d []ioDev) ([]ioDev, error) { return parseBlkio(b, d, false) },
			func(b []byte, d []ioDev) ([]ioDev, error) { return parseBlkio(b, d, true) },
		} {
			devs, err := parse(b, nil)
			if len(devs) > maxIODevs {
				t.Errorf("%d devices kept", len(devs))
			}
			for _, d := range devs {
				if err == nil && !isMajMin(d.Dev) {
					t.Errorf("device %q", d.Dev)
				}
			}
			if !bytes.Equal(b, orig) {
				t.Fatal("the parser wrote to its input")
			}
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		some, full, hs, hf, err := parsePressure(b)
		if err != nil && (some != 0 || full != 0 || hs || hf) {
			t.Errorf("values with an error")
		}
	})
}

func FuzzParseKmsgOOM(f *testing.F) {
	f.Add([]byte("3,1043,2783154321,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/docker/a,task_memcg=/docker/a/b,task=ctrapp,pid=4242,uid=0"))
	f.Add([]byte("3,1,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/d/A/x,task_memcg=/d/B,task_memcg=/d/A/x,task_memcg=/d/B,task=y,pid=2,uid=0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		memcg, ok := parseKmsgOOM(b)
		if ok && (!strings.HasPrefix(memcg, "/") || !strings.Contains(string(b), ",task_memcg="+memcg+",task=")) {
			t.Errorf("parseKmsgOOM(%q) = %q", b, memcg)
		}
	})
}
