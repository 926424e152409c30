package sysscan

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
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

func TestParseProcStat(t *testing.T) {
	var s procStat
	if err := parseProcStat(readFixture(t, "proc/stat"), &s); err != nil {
		t.Fatalf("parseProcStat: %v", err)
	}
	want := cpuTimes{7394, 10, 4849, 61602, 103, 1, 84, 2, 0, 0}
	if s.Total != want {
		t.Errorf("Total = %v; want %v", s.Total, want)
	}
	if len(s.CPUs) != 2 || s.CPUs[1].CPU != 1 || s.CPUs[1].Times[0] != 3716 {
		t.Errorf("CPUs = %+v", s.CPUs)
	}
	if s.Ctxt != 443898 || s.Btime != 1700000000 || s.Processes != 8105 || s.ProcsRunning != 3 ||
		s.ProcsBlocked != 1 || s.Intr != 219269 || s.SoftIRQ != 80970 {
		t.Errorf("parseProcStat = %+v", s)
	}
	// Reuse keeps working and old kernels with 4 columns parse.
	if err := parseProcStat([]byte("cpu 1 2 3 4\ncpu7 1 2 3 4\n"), &s); err != nil {
		t.Fatalf("parseProcStat(4 columns): %v", err)
	}
	if s.Total != (cpuTimes{1, 2, 3, 4}) || len(s.CPUs) != 1 || s.CPUs[0].CPU != 7 || s.Ctxt != 0 {
		t.Errorf("parseProcStat(4 columns) = %+v", s)
	}
	if err := parseProcStat(readFixture(t, "real/stat"), &s); err != nil || s.Btime == 0 || len(s.CPUs) == 0 {
		t.Errorf("parseProcStat(real) = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2\n", "cpu 1 2 x 4\n", "cpux 1 2 3 4\ncpu 1 2 3 4\n", "cpu 1 2 3 4\nctxt -1\n", "cpu 1 2 3 99999999999999999999\n"} {
		if err := parseProcStat([]byte(bad), &s); err == nil {
			t.Errorf("parseProcStat(%q) = nil error; want one", bad)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	kvs, err := parseMeminfo(readFixture(t, "proc/meminfo"), nil)
	if err != nil {
		t.Fatalf("parseMeminfo: %v", err)
	}
	got := map[string]uint64{}
	for _, e := range kvs {
		got[string(e.Key)] = e.Val
	}
	want := map[string]uint64{"MemTotal": 24683620 * 1024, "MemFree": 24284844 * 1024, "MemAvailable": 24375636 * 1024,
		"Buffers": 8124 * 1024, "HugePages_Total": 2, "Hugepagesize": 2048 * 1024}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseMeminfo = %v; want %v", got, want)
	}
	if kvs, err := parseMeminfo(readFixture(t, "real/meminfo"), nil); err != nil || len(kvs) < 20 {
		t.Errorf("parseMeminfo(real) = %d values, %v", len(kvs), err)
	}
	for _, bad := range []string{"MemTotal 5 kB\n", "MemTotal: x kB\n", "MemTotal: 5 MB\n", ": 5\n", "X: 99999999999999999999 kB\n"} {
		if _, err := parseMeminfo([]byte(bad), nil); err == nil {
			t.Errorf("parseMeminfo(%q) = nil error; want one", bad)
		}
	}
}

func TestParseLoadAvgUptimeFileNr(t *testing.T) {
	l, err := parseLoadAvg(readFixture(t, "proc/loadavg"))
	if want := (loadAvg{0.80, 0.46, 0.18, 1, 87, 8106}); err != nil || l != want {
		t.Errorf("parseLoadAvg = %+v, %v; want %+v", l, err, want)
	}
	up, idle, err := parseUptime(readFixture(t, "proc/uptime"))
	if err != nil || up != 370.95 || idle != 616.03 {
		t.Errorf("parseUptime = %v, %v, %v; want 370.95, 616.03", up, idle, err)
	}
	f, err := parseFileNr(readFixture(t, "proc/sys/fs/file-nr"))
	if want := (fileNr{486, 0, 2466167}); err != nil || f != want {
		t.Errorf("parseFileNr = %+v, %v; want %+v", f, err, want)
	}
	for _, real := range []func() error{
		func() error { _, err := parseLoadAvg(readFixture(t, "real/loadavg")); return err },
		func() error { _, _, err := parseUptime(readFixture(t, "real/uptime")); return err },
		func() error { _, err := parseFileNr(readFixture(t, "real/file-nr")); return err },
	} {
		if err := real(); err != nil {
			t.Errorf("real fixture: %v", err)
		}
	}
	for _, bad := range []string{"", "0.80 0.46 0.18 1-87 8106", "0.80 0.46 x 1/87 8106", "0.80 0.46 0.18 1/87", "1. 2 3 1/1 1", ".5 1 1 1/1 1"} {
		if _, err := parseLoadAvg([]byte(bad)); err == nil {
			t.Errorf("parseLoadAvg(%q) = nil error; want one", bad)
		}
	}
	for _, bad := range []string{"", "1.0", "1.0 x"} {
		if _, _, err := parseUptime([]byte(bad)); err == nil {
			t.Errorf("parseUptime(%q) = nil error; want one", bad)
		}
	}
	if _, err := parseFileNr([]byte("1 2")); err == nil {
		t.Errorf("parseFileNr(short) = nil error; want one")
	}
}

func TestParseNetDev(t *testing.T) {
	devs, err := parseNetDev(readFixture(t, "proc/net/dev"), nil)
	if err != nil || len(devs) != 2 {
		t.Fatalf("parseNetDev = %d devices, %v", len(devs), err)
	}
	if string(devs[1].Name) != "eth0" || devs[1].V != [16]uint64{11200848, 578, 1, 2, 3, 4, 5, 6, 56371, 621, 7, 8, 9, 10, 11, 12} {
		t.Errorf("eth0 = %s %v", devs[1].Name, devs[1].V)
	}
	if devs, err := parseNetDev(readFixture(t, "real/net_dev"), nil); err != nil || len(devs) == 0 || string(devs[0].Name) != "lo" {
		t.Errorf("parseNetDev(real) = %d, %v", len(devs), err)
	}
	for _, bad := range []string{"eth0: 1 2 3\n", ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", "eth0 1 2\n"} {
		if _, err := parseNetDev([]byte(bad), nil); err == nil {
			t.Errorf("parseNetDev(%q) = nil error; want one", bad)
		}
	}
}

func TestParseNetstat(t *testing.T) {
	es, err := parseNetstat(readFixture(t, "proc/net/snmp"), nil)
	if err != nil {
		t.Fatalf("parseNetstat: %v", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, string(e.Prefix)+"."+string(e.Name)+"="+itoa64(e.Val))
	}
	want := []string{"Ip.Forwarding=2", "Ip.DefaultTTL=64", "Ip.InReceives=604", "Tcp.RtoAlgorithm=1", "Tcp.RtoMin=200",
		"Tcp.RtoMax=120000", "Tcp.MaxConn=-1", "Tcp.ActiveOpens=17", "Tcp.CurrEstab=3"}
	if !slices.Equal(got, want) {
		t.Errorf("parseNetstat = %v; want %v", got, want)
	}
	for _, f := range []string{"real/net_snmp", "real/net_netstat"} {
		if es, err := parseNetstat(readFixture(t, f), nil); err != nil || len(es) < 20 {
			t.Errorf("parseNetstat(%s) = %d, %v", f, len(es), err)
		}
	}
	for _, bad := range []string{"Tcp: A B\nTcp: 1\n", "Tcp: A\nUdp: 1\n", "Tcp: A\n", "Tcp: A\nTcp: x\n", "Tcp A\nTcp 1\n"} {
		if _, err := parseNetstat([]byte(bad), nil); err == nil {
			t.Errorf("parseNetstat(%q) = nil error; want one", bad)
		}
	}
}

func itoa64(v int64) string {
	if v < 0 {
		return "-" + itoa64(-v)
	}
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa64(v/10) + string(rune('0'+v%10))
}

func TestParseDiskstats(t *testing.T) {
	ds, err := parseDiskstats(readFixture(t, "proc/diskstats"), nil)
	if err != nil || len(ds) != 4 {
		t.Fatalf("parseDiskstats = %d, %v", len(ds), err)
	}
	vda := ds[2]
	if string(vda.Name) != "vda" || vda.N != 17 || vda.V[diskReadOps] != 13849 || vda.V[diskInProgress] != 2 || vda.V[diskFlushMs] != 9 {
		t.Errorf("vda = %s %d %v", vda.Name, vda.N, vda.V)
	}
	if ds[3].N != 11 || ds[3].V[diskWeightedMs] != 9 {
		t.Errorf("vda1 (old kernel format) = %d %v", ds[3].N, ds[3].V)
	}
	if ds, err := parseDiskstats(readFixture(t, "real/diskstats"), nil); err != nil || len(ds) == 0 {
		t.Errorf("parseDiskstats(real) = %d, %v", len(ds), err)
	}
	for _, bad := range []string{"1 2\n", "1 2 sda 1 2 3\n", "1 2 sda 1 2 3 4 5 6 7 8 9 10 x\n"} {
		if _, err := parseDiskstats([]byte(bad), nil); err == nil {
			t.Errorf("parseDiskstats(%q) = nil error; want one", bad)
		}
	}
}

func TestParseTCPLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want tcpSock
	}{
		{"   0: 00000000:0016 00000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0",
			tcpSock{LocalPort: 22, State: tcpListen, RxQueue: 3}},
		{"   3: 0100007F:C350 0100007F:1F90 01 00000010:00000000 00:00000000 00000000  1001        0 1004 1 0000000000000000 20 4 30 10 -1",
			tcpSock{LocalPort: 50000, RemotePort: 8080, State: 1, TxQueue: 16, UID: 1001}},
		{"   1: 0000000000000000FFFF00000100007F:0016 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 02:000AB3C6 00000000     0        0 2002 1",
			tcpSock{LocalPort: 22, RemotePort: 54321, State: 1}},
	} {
		got, ok, err := parseTCPLine([]byte(tc.line))
		if err != nil || !ok || got != tc.want {
			t.Errorf("parseTCPLine(%q) = %+v, %v, %v; want %+v", tc.line, got, ok, err, tc.want)
		}
	}
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
	if _, ok, err := parseTCPLine([]byte(header)); ok || err != nil {
		t.Errorf("parseTCPLine(header) = %v, %v; want not ok, nil", ok, err)
	}
	for _, bad := range []string{
		"",
		"0: 00000000:0016",
		"0: 0000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1",
		"0: 00000000:0016 00000000:0000 0A 0000000000000000 00:00000000 00000000 0 0 1",
		"0: 00000000:0016 00000000:0000 00 00000000:00000000 00:00000000 00000000 0 0 1",
		"0: 00000000:0016 00000000:0000 FF 00000000:00000000 00:00000000 00000000 0 0 1",
		"0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000 x 0 1",
		"0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000 99999999999 0 1",
		"0: 00000000:00G6 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1",
	} {
		if _, _, err := parseTCPLine([]byte(bad)); err == nil {
			t.Errorf("parseTCPLine(%q) = nil error; want one", bad)
		}
	}
	for _, f := range []string{"real/net_tcp", "real/net_tcp6", "proc/net/tcp", "proc/net/tcp6"} {
		for _, line := range strings.Split(strings.TrimSpace(string(readFixture(t, f))), "\n") {
			if _, _, err := parseTCPLine([]byte(line)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}
