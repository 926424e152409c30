package sysscan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/kfile"
)

// Fuzz targets for every parser of outside input. Seeds are the testdata fixtures; run e.g.
//
//	go test -run '^$' -fuzz '^FuzzParsePIDStat$' -fuzztime 1m ./internal/sysscan

func addFixtures(f *testing.F, paths ...string) {
	for _, p := range paths {
		f.Add(readFixture(f, p))
	}
}

func FuzzParseProcStat(f *testing.F) {
	addFixtures(f, "proc/stat", "real/stat")
	f.Add([]byte("cpu 1 2 3 4\ncpu0 1 2 3 4\n"))
	var s procStat
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := parseProcStat(b, &s); err == nil && !s.HasTotal {
			t.Errorf("no error without a cpu line")
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	addFixtures(f, "proc/meminfo", "real/meminfo")
	f.Fuzz(func(t *testing.T, b []byte) {
		kvs, err := parseMeminfo(b, nil)
		if err != nil {
			return
		}
		for _, e := range kvs {
			if len(e.Key) == 0 || bytes.IndexByte(e.Key, ':') >= 0 {
				t.Errorf("bad key %q", e.Key)
			}
		}
	})
}

func FuzzParseSmallFiles(f *testing.F) {
	addFixtures(f, "proc/loadavg", "proc/uptime", "proc/sys/fs/file-nr", "real/loadavg", "real/uptime", "real/file-nr")
	f.Fuzz(func(t *testing.T, b []byte) {
		parseLoadAvg(b)
		parseUptime(b)
		parseFileNr(b)
		kfile.ParseDecimal(b)
	})
}

func FuzzParseNetDev(f *testing.F) {
	addFixtures(f, "proc/net/dev", "real/net_dev")
	f.Fuzz(func(t *testing.T, b []byte) {
		devs, err := parseNetDev(b, nil)
		if err != nil {
			return
		}
		for _, d := range devs {
			if len(d.Name) == 0 {
				t.Errorf("empty interface name")
			}
		}
	})
}

func FuzzParseNetstat(f *testing.F) {
	addFixtures(f, "proc/net/snmp", "proc/net/netstat", "real/net_snmp", "real/net_netstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		parseNetstat(b, nil)
	})
}

func FuzzParseDiskstats(f *testing.F) {
	addFixtures(f, "proc/diskstats", "real/diskstats")
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := parseDiskstats(b, nil)
		if err != nil {
			return
		}
		for _, d := range ds {
			if d.N < 11 || d.N > diskFields {
				t.Errorf("%d columns accepted", d.N)
			}
		}
	})
}

func FuzzParseTCPLine(f *testing.F) {
	for _, p := range []string{"proc/net/tcp", "proc/net/tcp6", "real/net_tcp", "real/net_tcp6"} {
		for _, line := range strings.Split(string(readFixture(f, p)), "\n") {
			f.Add([]byte(line))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok, err := parseTCPLine(b)
		if err == nil && ok {
			if s.State == 0 || int(s.State) >= len(tcpStates) {
				t.Errorf("state %d accepted", s.State)
			}
		}
		// The collector path must never panic either, whatever the line.
		var ts tcpScan
		ts.byUID = map[uint32]int64{}
		ts.line(b)
	})
}
