package sysscan

import (
	"bytes"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/kfile"
)

// Fuzz targets for the parsers of System's and Filesystems' files; run e.g.
//
//	go test -run '^$' -fuzz '^FuzzParseMountinfo$' -fuzztime 1m ./internal/sysscan

func FuzzParseVmstat(f *testing.F) {
	addFixtures(f, "proc/vmstat", "real/vmstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		nv, err := parseVmstat(b, nil)
		if err != nil {
			return
		}
		for _, e := range nv {
			if len(e.Name) == 0 || bytes.ContainsAny(e.Name, " \t\n") {
				t.Errorf("bad name %q", e.Name)
			}
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	addFixtures(f, "proc/pressure/cpu", "proc/pressure/io", "real/pressure_io")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePressure(b)
		if err == nil && !p.Some.Present {
			t.Errorf("no error without a some line")
		}
	})
}

func FuzzParseSockstat(f *testing.F) {
	addFixtures(f, "proc/net/sockstat", "proc/net/sockstat6", "real/sockstat", "real/sockstat6")
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parseSockstat(b, nil)
		if err != nil {
			return
		}
		for _, e := range es {
			if len(e.Proto) == 0 || len(e.Name) == 0 {
				t.Errorf("empty name in %+v", e)
			}
		}
	})
}

func FuzzParseSNMP6(f *testing.F) {
	addFixtures(f, "proc/net/snmp6", "real/snmp6")
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parseSNMP6(b, nil)
		if err != nil {
			return
		}
		for _, e := range es {
			if len(e.Name) == 0 || len(e.Prefix) == 0 || e.Prefix[len(e.Prefix)-1] != '6' {
				t.Errorf("bad split %q %q", e.Prefix, e.Name)
			}
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	addFixtures(f, "fsproc/1/mountinfo", "real/mountinfo")
	var esc []byte
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parseMountinfo(b, nil, &esc)
		if err != nil {
			return
		}
		total := 0
		for _, e := range es {
			if len(e.MountPoint) == 0 || len(e.FSType) == 0 || len(e.Device) == 0 {
				t.Errorf("empty kfile.Field in %q", e)
			}
			total += len(e.MountPoint) + len(e.Device)
		}
		if total > len(b) {
			t.Errorf("unescaped %d bytes from %d", total, len(b))
		}
	})
}

func FuzzParseOSRelease(f *testing.F) {
	addFixtures(f, "etc/os-release", "real/os-release")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, _ := parseOSRelease(b)
		for _, v := range r.Vals {
			if !utf8.ValidString(v) {
				t.Errorf("invalid UTF-8 label value %q", v)
			}
		}
	})
}

func FuzzParseSysfsValues(f *testing.F) {
	for _, s := range []string{"1500\n", "-1\n", "0x1003\n", "btime 1700000000\n", "up\n", "temp1_input", "coretemp.0"} {
		f.Add([]byte(s))
	}
	addFixtures(f, "real/stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		kfile.ParseIntValue(b)
		parseHexValue(b)
		kfile.ParseBtime(b)
		hasOption(b, "ro")
		if typ, sensor, prop, ok := splitSensorFile(string(b)); ok && (typ == "" || sensor == "" || prop == "") {
			t.Errorf("split %q into %q %q %q", b, typ, sensor, prop)
		}
		for _, c := range []byte(cleanHwmonName(string(b))) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ':' || c == '_') {
				t.Errorf("cleanHwmonName(%q) has %q", b, c)
			}
		}
	})
}

func FuzzParseMdstat(f *testing.F) {
	addFixtures(f, "proc/mdstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		as, err := parseMdstat(b, nil)
		if err != nil {
			return
		}
		for _, a := range as {
			if len(a.Name) == 0 || a.State < 0 || a.State >= len(mdStates) {
				t.Errorf("bad array %+v", a)
			}
		}
	})
}

func FuzzParseSoftnetARP(f *testing.F) {
	addFixtures(f, "proc/net/softnet_stat", "real/softnet_stat", "proc/net/arp", "real/arp")
	f.Fuzz(func(t *testing.T, b []byte) {
		parseSoftnet(b, nil)
		as, err := parseARP(b, nil)
		if err != nil {
			return
		}
		for _, a := range as {
			if len(a.Device) == 0 || a.N <= 0 {
				t.Errorf("bad count %+v", a)
			}
		}
	})
}

func FuzzParseConntrackStatUDP(f *testing.F) {
	addFixtures(f, "proc/net/stat/nf_conntrack", "real/nf_conntrack_stat", "proc/net/udp", "real/udp")
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parseConntrackStat(b, nil)
		if err == nil {
			for _, e := range es {
				if e.Val < 0 || string(e.Name) == "entries" {
					t.Errorf("bad column %q %d", e.Name, e.Val)
				}
			}
		}
		parseUDPLine(b)
		selinuxMode(b)
	})
}

func FuzzParseDiskIDsUdev(f *testing.F) {
	addFixtures(f, "proc/diskstats", "real/diskstats", "run/udev/data/b254:0")
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := parseDiskIDs(b, nil)
		if err == nil {
			for _, d := range ds {
				if len(d.Name) == 0 {
					t.Errorf("empty name")
				}
			}
		}
		for _, v := range parseUdevDisk(b) {
			if !utf8.ValidString(v) {
				t.Errorf("invalid UTF-8 %q", v)
			}
		}
	})
}

func FuzzParseSchedstat(f *testing.F) {
	addFixtures(f, "proc/schedstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := parseSchedstat(b, nil)
		if err == nil {
			for _, c := range cs {
				if c.CPU < 0 {
					t.Errorf("cpu %d", c.CPU)
				}
			}
		}
	})
}

func FuzzParseBondNames(f *testing.F) {
	addFixtures(f, "bonding/sys/class/net/bonding_masters", "bonding/sys/class/net/bond0/bonding/slaves")
	f.Add([]byte("bond0 ../x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := parseBondNames(b, nil)
		if err != nil {
			return
		}
		for _, n := range names {
			if len(n) == 0 || len(n) > 15 || bytes.ContainsAny(n, "/ \t\n\x00") || string(n) == "." || string(n) == ".." {
				t.Errorf("bad name %q", n)
			}
		}
		parseMIIStatus(b)
	})
}

func FuzzParseCpufreqKHz(f *testing.F) {
	addFixtures(f, "cpufreq/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
	f.Add([]byte("<unknown>\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseCpufreqKHz(b)
		if err == nil && (v%1000 != 0 || v > 1<<53) {
			t.Errorf("%q: %d Hz", b, v)
		}
	})
}

func FuzzParsePowerSupplyValue(f *testing.F) {
	addFixtures(f, "power_supply/sys/class/power_supply/BAT0/voltage_now", "power_supply/sys/class/power_supply/BAT0/status")
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parsePowerSupplyValue(b, 1e6)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("%q: %v", b, v)
		}
	})
}

func FuzzParseInterrupts(f *testing.F) {
	addFixtures(f, "proc/interrupts")
	f.Add([]byte("  CPU0\nIPI0:123 Rescheduling interrupts\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, vals, ncpu, err := parseInterrupts(b, nil, nil)
		if err != nil {
			return
		}
		if len(vals) != len(lines)*ncpu {
			t.Errorf("%d values for %d lines of %d CPUs", len(vals), len(lines), ncpu)
		}
		for _, l := range lines {
			if len(l.Name) == 0 {
				t.Errorf("empty name")
			}
			irqLabels(l.Name, l.Rest)
		}
	})
}
