package sysscan

import (
	"math"
	"reflect"
	"testing"

	"github.com/cantal-go/cantal/internal/kfile"
	"golang.org/x/sys/unix"
)

func TestParseVmstat(t *testing.T) {
	got, err := parseVmstat(readFixture(t, "proc/vmstat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || string(got[0].Name) != "nr_free_pages" || got[0].Val != 123456 || string(got[9].Name) != "oom_kill" {
		t.Errorf("got %d entries: %v", len(got), got)
	}
	real, err := parseVmstat(readFixture(t, "real/vmstat"), nil)
	if err != nil || len(real) < 100 {
		t.Errorf("real vmstat: %d entries, %v", len(real), err)
	}
	for _, bad := range []string{"pgfault\n", "pgfault x\n", "pgfault 1 2\n"} {
		if _, err := parseVmstat([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParsePressure(t *testing.T) {
	p, err := parsePressure(readFixture(t, "proc/pressure/io"))
	if err != nil {
		t.Fatal(err)
	}
	want := psi{Some: psiLine{true, [3]float64{12.34, 5, 1}, 98765432}, Full: psiLine{true, [3]float64{10, 4, 0.5}, 87654321}}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	// before 5.13 the cpu file has no full line
	p, err = parsePressure([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"))
	if err != nil || p.Full.Present || p.Some.Total != 5 {
		t.Errorf("some only: %+v %v", p, err)
	}
	if _, err := parsePressure(readFixture(t, "real/pressure_io")); err != nil {
		t.Errorf("real: %v", err)
	}
	for _, bad := range []string{"", "full avg10=0.00 total=1\n", "some avg10=0.00\n", "some total=x\n", "half total=1\n", "some total=1 what=2\n"} {
		if _, err := parsePressure([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseSockstat(t *testing.T) {
	got, err := parseSockstat(readFixture(t, "proc/net/sockstat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 12 || string(got[0].Proto) != "sockets" || string(got[0].Name) != "used" || got[0].Val != 290 ||
		string(got[5].Proto) != "TCP" || string(got[5].Name) != "mem" || got[5].Val != 2 {
		t.Errorf("got %v", got)
	}
	for _, f := range []string{"real/sockstat", "real/sockstat6", "proc/net/sockstat6"} {
		if _, err := parseSockstat(readFixture(t, f), nil); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, bad := range []string{"TCP inuse 1\n", "TCP: inuse\n", "TCP: inuse x\n", ": inuse 1\n"} {
		if _, err := parseSockstat([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseSNMP6(t *testing.T) {
	got, err := parseSNMP6(readFixture(t, "proc/net/snmp6"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, string(e.Prefix)+"."+string(e.Name))
	}
	want := []string{"Ip6.InReceives", "Ip6.OutRequests", "Icmp6.InMsgs", "Icmp6.OutType133", "Udp6.InDatagrams", "UdpLite6.InErrors"}
	if !reflect.DeepEqual(names, want) || got[0].Val != 1111 {
		t.Errorf("got %v", names)
	}
	if real, err := parseSNMP6(readFixture(t, "real/snmp6"), nil); err != nil || len(real) < 50 {
		t.Errorf("real: %d entries, %v", len(real), err)
	}
	for _, bad := range []string{"IpInReceives 1\n", "Ip6 1\n", "Ip6InReceives\n", "Ip6InReceives x\n"} {
		if _, err := parseSNMP6([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	var esc []byte
	got, err := parseMountinfo(readFixture(t, "fsproc/1/mountinfo"), nil, &esc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("%d entries", len(got))
	}
	e := got[5]
	if string(e.MountPoint) != "/srv/my data" || string(e.Device) != "/dev/vdb" || string(e.FSType) != "xfs" || !hasOption(e.Options, "ro") {
		t.Errorf("entry 5: %q", e)
	}
	if string(got[0].MountPoint) != "/" || hasOption(got[0].Options, "ro") || string(got[6].Device) != "server:/export" {
		t.Errorf("entries: %q", got)
	}
	if real, err := parseMountinfo(readFixture(t, "real/mountinfo"), nil, &esc); err != nil || len(real) == 0 {
		t.Errorf("real: %d entries, %v", len(real), err)
	}
	for _, bad := range []string{"1 2 3:4 / /\n", "1 2 3:4 / / rw shared:1 ext4 /dev/x rw\n", "1 2 3:4 / / rw - ext4\n"} {
		if _, err := parseMountinfo([]byte(bad), nil, &esc); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got := string(unescapeMount(nil, []byte(`a\134b\040c\011\12\999`))); got != "a\\b c\t\\12\\999" {
		t.Errorf("unescape: %q", got)
	}
}

func TestParseOSRelease(t *testing.T) {
	r, err := parseOSRelease(readFixture(t, "etc/os-release"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Vals[0] != "Debian GNU/Linux" || r.Vals[1] != "debian" || r.Vals[6] != "bookworm" || r.Vals[8] != `Server \ edition` {
		t.Errorf("got %q", r.Vals)
	}
	if _, err := parseOSRelease(readFixture(t, "real/os-release")); err != nil {
		t.Errorf("real: %v", err)
	}
	for _, bad := range []string{"NAME\n", `NAME="x`, "NAME='x\n", `NAME="a"b"`} {
		if _, err := parseOSRelease([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if r, _ := parseOSRelease([]byte(`NAME="a \"q\" \\ b"`)); r.Vals[0] != `a "q" \ b` {
		t.Errorf("escapes: %q", r.Vals[0])
	}
}

func TestTimexValues(t *testing.T) {
	tx := unix.Timex{Offset: 1500, Freq: 65536 * 10, Maxerror: 250000, Esterror: 1000, Status: 1, Constant: 7,
		Tick: 10000, Ppsfreq: 65536, Jitter: 20, Shift: 4, Stabil: 65536 * 2, Jitcnt: 1, Calcnt: 2, Errcnt: 3, Stbcnt: 4, Tai: 37}
	v := timexValues(0, &tx)
	f := func(i int) float64 { return mathFloat(v[i]) }
	if v[txSync] != 1 || f(txOffset) != 0.0015 || f(txFreq) != 1.00001 || f(txMaxerror) != 0.25 || f(txEsterror) != 0.001 ||
		v[txStatus] != 1 || v[txConstant] != 7 || f(txTick) != 0.01 || f(txPPSFreq) != 1e-6 || f(txJitter) != 20e-6 ||
		v[txShift] != 4 || f(txStabil) != 2e-6 || v[txJitcnt] != 1 || v[txStbcnt] != 4 || v[txTAI] != 37 {
		t.Errorf("µs: %v", v)
	}
	tx.Status |= staNano
	v = timexValues(timeError, &tx)
	if v[txSync] != 0 || f(txOffset) != 1.5e-6 || f(txJitter) != 20e-9 || f(txMaxerror) != 0.25 {
		t.Errorf("ns: %v", v)
	}
}

func TestParseBtime(t *testing.T) {
	if v, err := kfile.ParseBtime(readFixture(t, "real/stat")); err != nil || v < 1e9 {
		t.Errorf("real: %d %v", v, err)
	}
	for _, bad := range []string{"cpu 1\n", "btime x\n"} {
		if _, err := kfile.ParseBtime([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func mathFloat(b uint64) float64 { return math.Float64frombits(b) }

func TestParseMdstat(t *testing.T) {
	got, err := parseMdstat(readFixture(t, "proc/mdstat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name                                  string
		State                                 string
		Required, Active, Failed, Spare, Down int64
		Blocks, Synced                        int64
	}
	var rows []row
	for _, a := range got {
		rows = append(rows, row{string(a.Name), mdStates[a.State], a.Required, a.Active, a.Failed, a.Spare, a.Down, a.Blocks, a.Synced})
	}
	want := []row{
		{"md127", "active", 2, 2, 0, 0, 0, 976630464, 976630464},
		{"md0", "recovering", 3, 2, 1, 1, 1, 1953260544, 83034112},
		{"md1", "inactive", 0, 0, 0, 1, 0, 1000, 1000},
		{"md2", "active", 2, 2, 0, 0, 0, 2000, 2000},
		{"md3", "check", 2, 2, 0, 0, 0, 3000, 675},
		{"md4", "resync", 2, 2, 0, 0, 0, 4000, 4000},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got\n%v\nwant\n%v", rows, want)
	}
	if got, err := parseMdstat([]byte("Personalities : \nunused devices: <none>\n"), nil); err != nil || len(got) != 0 {
		t.Errorf("no arrays: %v %v", got, err)
	}
	for _, bad := range []string{"md0 active raid1 sda[0]\n", "md0 : broken sda[0]\n", "   100 blocks\n", "md0 : active raid1 [0]\n",
		"md0 : active raid1 sda[0]\n   x blocks\n", "md0 : active raid1 sda[0]\n   1 blocks [a/2]\n", "md0 : active raid1 sda[0]\n   recovery = 1% finish\n"} {
		if _, err := parseMdstat([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseSoftnet(t *testing.T) {
	got, err := parseSoftnet(readFixture(t, "proc/net/softnet_stat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []softnetCPU{{0, 0xa000, 2, 3}, {1, 0xb000, 0, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// 5.10+: the 13th column numbers the CPU (here CPU 1 offline)
	got, err = parseSoftnet([]byte("1 0 0 0 0 0 0 0 0 0 0 0 0\n2 0 0 0 0 0 0 0 0 0 0 0 2\n"), nil)
	if err != nil || len(got) != 2 || got[1].CPU != 2 || got[1].Processed != 2 {
		t.Errorf("with cpu column: %v %v", got, err)
	}
	if real, err := parseSoftnet(readFixture(t, "real/softnet_stat"), nil); err != nil || len(real) == 0 || real[0].CPU != 0 {
		t.Errorf("real: %v %v", real, err)
	}
	for _, bad := range []string{"1 2\n", "1 2 x\n", "1 0 0 0 0 0 0 0 0 0 0 0 fffffffff\n"} {
		if _, err := parseSoftnet([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseARP(t *testing.T) {
	got, err := parseARP(readFixture(t, "proc/net/arp"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0].Device) != "eth0" || got[0].N != 2 || string(got[1].Device) != "eth1" || got[1].N != 1 {
		t.Errorf("got %v", got)
	}
	if _, err := parseARP(readFixture(t, "real/arp"), nil); err != nil {
		t.Errorf("real: %v", err)
	}
	for _, bad := range []string{"10.0.0.1 0x1 0x2 aa * eth0\n", "IP address HW\n10.0.0.1 0x1 eth0\n"} {
		if _, err := parseARP([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseConntrackStat(t *testing.T) {
	got, err := parseConntrackStat(readFixture(t, "proc/net/stat/nf_conntrack"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, e := range got {
		m[string(e.Name)] = e.Val
	}
	if len(got) != 16 || m["found"] != 7 || m["invalid"] != 0x11 || m["search_restart"] != 11 || m["drop"] != 3 {
		t.Errorf("got %v", m)
	}
	if _, ok := m["entries"]; ok {
		t.Errorf("entries summed")
	}
	if _, err := parseConntrackStat(readFixture(t, "real/nf_conntrack_stat"), nil); err != nil {
		t.Errorf("real: %v", err)
	}
	for _, bad := range []string{"", "00000001 00000002\n", "entries found\n1 2 3\n", "entries found\n1\n", "entries found\n1 x\n"} {
		if _, err := parseConntrackStat([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseUDPLine(t *testing.T) {
	var tx, rx uint64
	b := readFixture(t, "proc/net/udp")
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		t1, r1, ok, err := parseUDPLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			tx, rx = tx+t1, rx+r1
		}
	}
	if tx != 0x100 || rx != 0xa00 {
		t.Errorf("tx %x rx %x", tx, rx)
	}
	for _, bad := range []string{"1: 0100007F:B6B5 00000000:0000 07", "1: a b 07 0000:zz", "1: a b 07 00000"} {
		if _, _, _, err := parseUDPLine([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSelinuxMode(t *testing.T) {
	for in, want := range map[string]int64{"SELINUX=enforcing\n": 1, "# x\nSELINUX=permissive\n": 0, `SELINUX="disabled"`: -1} {
		if m, ok := selinuxMode([]byte(in)); !ok || m != want {
			t.Errorf("%q: %d %v", in, m, ok)
		}
	}
	if _, ok := selinuxMode([]byte("SELINUXTYPE=targeted\n")); ok {
		t.Errorf("no SELINUX= line: ok")
	}
}

func TestParseDiskIDsUdev(t *testing.T) {
	got, err := parseDiskIDs(readFixture(t, "proc/diskstats"), nil)
	if err != nil || len(got) != 4 || string(got[2].Name) != "vda" || got[2].Major != 254 || got[3].Minor != 1 {
		t.Errorf("got %v %v", got, err)
	}
	if real, err := parseDiskIDs(readFixture(t, "real/diskstats"), nil); err != nil || len(real) == 0 {
		t.Errorf("real: %v", err)
	}
	for _, bad := range []string{"254 0\n", "x 0 vda\n", "254 -1 vda\n"} {
		if _, err := parseDiskIDs([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	u := parseUdevDisk(readFixture(t, "run/udev/data/b254:0"))
	if u != [5]string{"pci-0000:00:05.0", "0x5000c500a1b2c3d4", "QEMU_HARDDISK", "abc123", "2.5+"} {
		t.Errorf("udev %q", u)
	}
}

func TestParseSchedstat(t *testing.T) {
	got, err := parseSchedstat(readFixture(t, "proc/schedstat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []schedCPU{{0, 2469390768, 225588934, 8432}, {1, 1000, 2000, 30}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"cpu0 1 2 3\n", "cpux 0 0 0 0 0 0 0 0 0\n", "cpu0 0 0 0 0 0 0 x 0 0\n"} {
		if _, err := parseSchedstat([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestHwmonNames(t *testing.T) {
	for in, want := range map[string]string{"coretemp.0": "coretemp_0", "0000:00:18.3": "0000:00:18_3", "-ACPI Tz-": "acpi_tz", "__": ""} {
		if got := cleanHwmonName(in); got != want {
			t.Errorf("cleanHwmonName(%q) = %q, want %q", in, got, want)
		}
	}
	type split struct{ typ, sensor, prop string }
	for in, want := range map[string]*split{"temp1_input": {"temp", "temp1", "input"}, "in0_input": {"in", "in0", "input"},
		"fan12_min": {"fan", "fan12", "min"}, "name": nil, "uevent": nil, "temp_input": nil, "1_input": nil, "temp1_": nil} {
		typ, sensor, prop, ok := splitSensorFile(in)
		if want == nil {
			if ok {
				t.Errorf("%q: split as %q %q %q", in, typ, sensor, prop)
			}
		} else if !ok || (split{typ, sensor, prop}) != *want {
			t.Errorf("%q: %q %q %q %v", in, typ, sensor, prop, ok)
		}
	}
	if got := hwmonChipName("testdata/sys/class/hwmon/hwmon1"); got != "platform_coretemp_0" {
		t.Errorf("chip with a device link: %q", got)
	}
	if got := hwmonChipName("testdata/sys/class/hwmon/hwmon2"); got != "acpitz" {
		t.Errorf("chip with a name file: %q", got)
	}
}
