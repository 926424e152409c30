package sysscan

import (
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

func TestSystemFixture(t *testing.T) {
	opt := fixtureOptions()
	opt.Udev = "testdata/run/udev"
	s := NewSystem(opt)
	defer s.Close()
	r := series.NewRecorder()
	for range 2 { // the second scan writes the rare values again from memory
		clear(r.Values)
		if err := s.Collect(context.Background(), r); err != nil {
			t.Fatalf("Collect: %v", err)
		}
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	u := func(v uint64) uint64 { return v }
	f := func(v float64) uint64 { return math.Float64bits(v) }
	want := map[string]uint64{
		`{"metric":"vmstat.nr_free_pages"}`:                              u(123456),
		`{"metric":"vmstat.pgfault"}`:                                    u(987654321),
		`{"metric":"vmstat.oom_kill"}`:                                   u(2),
		`{"metric":"pressure.cpu.some_us"}`:                              u(123456),
		`{"metric":"pressure.cpu.some_avg10"}`:                           f(1.5),
		`{"metric":"pressure.cpu.full_us"}`:                              u(0),
		`{"metric":"pressure.memory.full_avg300"}`:                       f(0.3),
		`{"metric":"pressure.io.some_us"}`:                               u(98765432),
		`{"metric":"pressure.io.full_us"}`:                               u(87654321),
		`{"metric":"sockstat.sockets.used"}`:                             u(290),
		`{"metric":"sockstat.TCP.inuse"}`:                                u(9),
		`{"metric":"sockstat.TCP.orphan"}`:                               u(1),
		`{"metric":"sockstat.TCP.tw"}`:                                   u(3),
		`{"metric":"sockstat.TCP.mem"}`:                                  u(2),
		`{"metric":"sockstat.TCP.mem_bytes"}`:                            u(2 * 4096),
		`{"metric":"sockstat.UDP.mem_bytes"}`:                            u(5 * 4096),
		`{"metric":"sockstat.FRAG.memory"}`:                              u(0),
		`{"metric":"sockstat.TCP6.inuse"}`:                               u(6),
		`{"metric":"sockstat.RAW6.inuse"}`:                               u(1),
		`{"metric":"net.Ip6.InReceives"}`:                                u(1111),
		`{"metric":"net.Icmp6.OutType133"}`:                              u(4),
		`{"metric":"net.Udp6.InDatagrams"}`:                              u(55),
		`{"metric":"net.UdpLite6.InErrors"}`:                             u(0),
		`{"metric":"conntrack.entries"}`:                                 u(4242),
		`{"metric":"conntrack.entries_limit"}`:                           u(262144),
		`{"metric":"system.entropy_avail"}`:                              u(256),
		`{"metric":"system.entropy_pool_size"}`:                          u(256),
		`{"metric":"system.boot_time_s"}`:                                u(1700000000),
		`{"interface":"eth0","metric":"net.interface.up"}`:               u(1),
		`{"interface":"lo","metric":"net.interface.up"}`:                 u(0),
		`{"interface":"eth0","metric":"net.interface.speed"}`:            u(10000 * 125000),
		`{"interface":"eth0","metric":"net.interface.mtu"}`:              u(1500),
		`{"interface":"eth0","metric":"net.interface.flags"}`:            u(0x1003),
		`{"interface":"eth0","metric":"net.interface.carrier_changes"}`:  u(4),
		`{"interface":"lo","metric":"net.interface.protocol"}`:           u(772),
		`{"interface":"lo","metric":"net.interface.iface_id"}`:           u(1),
		`{"interface":"eth0","metric":"net.interface.name_assign_type"}`: u(4),
		`{"device":"md0","metric":"md.state","state":"recovering"}`:      u(1),
		`{"device":"md0","metric":"md.state","state":"active"}`:          u(0),
		`{"device":"md0","metric":"md.disks","state":"failed"}`:          u(1),
		`{"device":"md0","metric":"md.disks","state":"active"}`:          u(2),
		`{"device":"md0","metric":"md.disks_required"}`:                  u(3),
		`{"device":"md0","metric":"md.blocks_synced"}`:                   u(83034112),
		`{"device":"md1","metric":"md.state","state":"inactive"}`:        u(1),
	}
	for k, v := range want {
		got, ok := r.Values[k]
		if !ok {
			t.Errorf("%s: missing", k)
		} else if got != v {
			t.Errorf("%s = %d, want %d", k, got, v)
		}
	}
	refs := r.Refs()
	kinds := map[string]series.Kind{
		`{"metric":"vmstat.nr_free_pages"}`:        series.Level,
		`{"metric":"vmstat.nr_dirtied"}`:           series.Counter,
		`{"metric":"vmstat.workingset_nodes"}`:     series.Level,
		`{"metric":"vmstat.pgfault"}`:              series.Counter,
		`{"metric":"pressure.io.full_us"}`:         series.Counter,
		`{"metric":"net.Ip6.InReceives"}`:          series.Counter,
		`{"metric":"timex.offset_s"}`:              series.Float,
		`{"metric":"timex.sync_status"}`:           series.Level,
		`{"metric":"timex.pps_calibration_count"}`: series.Counter,
	}
	for k, want := range kinds {
		if ref := refs[k]; ref == nil || ref.Kind != want {
			t.Errorf("%s: ref %v, want kind %v", k, ref, want)
		}
	}
	for _, absent := range []string{
		`{"interface":"lo","metric":"net.interface.name_assign_type"}`, // no file
		`{"interface":"bonding_masters","metric":"net.interface.up"}`,
		`{"metric":"thermal.zone.temp_c","type":"acpitz","zone":"1"}`,
	} {
		if _, ok := r.Values[absent]; ok {
			t.Errorf("%s: present", absent)
		}
	}
	if _, ok := r.Values[`{"metric":"conntrack.stat.entries"}`]; ok {
		t.Errorf("conntrack.stat.entries: the table size is not a counter")
	}
	var clocks, disks, hw []string
	var info, osInfo, uname bool
	for k, st := range r.States {
		l := refs[k].Labels
		switch l["metric"] {
		case "net.interface.info":
			if l["interface"] == "eth0" {
				info = true
				if l["address"] != "52:54:00:12:34:56" || l["duplex"] != "full" || l["operstate"] != "up" || st.Text != "up" {
					t.Errorf("eth0 info %v %q", l, st.Text)
				}
			}
		case "system.os":
			osInfo = true
			if l["id"] != "debian" || l["version_id"] != "12" || l["pretty_name"] != "Debian GNU/Linux 12 (bookworm)" ||
				l["version_codename"] != "bookworm" || l["variant"] != `Server \ edition` || st.Text != l["pretty_name"] {
				t.Errorf("os %v %q", l, st.Text)
			}
		case "system.clocksource.available", "system.clocksource.current":
			clocks = append(clocks, l["metric"][len("system.clocksource."):]+":"+l["device"]+":"+l["clocksource"]+":"+st.Text)
		case "disk.info":
			disks = append(disks, strings.Join([]string{l["device"], l["major"], l["minor"], l["path"], l["wwn"], l["model"], l["serial"], l["revision"], st.Text}, " "))
		case "hwmon.chip", "hwmon.sensor":
			hw = append(hw, l["metric"]+" "+l["chip"]+" "+l["chip_name"]+l["sensor"]+" "+l["label"]+" "+st.Text)
		case "system.uname":
			uname = true
			if l["sysname"] != "Linux" || l["release"] == "" || st.Since != 1700000000_000 {
				t.Errorf("uname %v %+v", l, st)
			}
		}
	}
	slices.Sort(clocks)
	if want := []string{"available:0:acpi_pm:acpi_pm", "available:0:kvm-clock:kvm-clock", "available:0:tsc:tsc", "current:0:kvm-clock:kvm-clock"}; !slices.Equal(clocks, want) {
		t.Errorf("clock sources %v, want %v", clocks, want)
	}
	slices.Sort(disks)
	if want := []string{
		"vda 254 0 pci-0000:00:05.0 0x5000c500a1b2c3d4 QEMU_HARDDISK abc123 2.5+ vda",
		"vda1 254 1      vda1",
	}; !slices.Equal(disks, want) {
		t.Errorf("disk.info %q, want %q", disks, want)
	}
	slices.Sort(hw)
	if want := []string{"hwmon.chip acpitz acpitz  acpitz", "hwmon.chip platform_coretemp_0 coretemp  coretemp",
		"hwmon.sensor platform_coretemp_0 temp1 Package id 0 Package id 0"}; !slices.Equal(hw, want) {
		t.Errorf("hwmon states %q, want %q", hw, want)
	}
	tz := 0
	for k, ref := range refs {
		if ref.Labels["metric"] == "system.time_zone_offset_s" {
			tz++
			if name, off := time.Now().Zone(); ref.Labels["time_zone"] != name || int64(r.Values[k]) != int64(off) {
				t.Errorf("time zone %v = %d, want %s %d", ref.Labels, int64(r.Values[k]), name, off)
			}
		}
	}
	if tz != 1 {
		t.Errorf("%d time zone series", tz)
	}
	if !info || !osInfo || !uname {
		t.Errorf("states: interface info %v, os %v, uname %v", info, osInfo, uname)
	}
}

// TestSystemOptionalAbsent: a kernel without pressure, IPv6 or conntrack gives no series and
// no problem for them; a required file that is missing is a problem, the rest still collected.
func TestSystemOptionalAbsent(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/proc/sys/kernel/random", 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dir+"/proc/vmstat", []byte("pgfault 5\n"), 0o644)
	os.WriteFile(dir+"/proc/stat", []byte("cpu 1 2 3 4\nbtime 12\n"), 0o644)
	os.WriteFile(dir+"/proc/sys/kernel/random/entropy_avail", []byte("256\n"), 0o644)
	os.WriteFile(dir+"/proc/sys/kernel/random/poolsize", []byte("oops\n"), 0o644)
	s := NewSystem(Options{Proc: dir + "/proc", Sys: dir + "/sys"})
	defer s.Close()
	r := series.NewRecorder()
	if err := s.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	var srcs []string
	for k := range r.Problems {
		srcs = append(srcs, k)
	}
	wantProblems := map[string]bool{
		dir + "/proc/net/sockstat": true, dir + "/proc/sys/kernel/random/poolsize": true, dir + "/proc/net/softnet_stat": true, dir + "/proc/net/udp": true, dir + "/proc/diskstats": true,
		dir + "/sys/class/net": true, "os-release": true,
	}
	for _, k := range srcs {
		if !wantProblems[k] {
			t.Errorf("unexpected problem %s: %v", k, r.Problems[k])
		}
	}
	for k := range wantProblems {
		if r.Problems[k] == nil {
			t.Errorf("no problem for %s (have %v)", k, srcs)
		}
	}
	if r.Values[`{"metric":"vmstat.pgfault"}`] != 5 || r.Values[`{"metric":"system.boot_time_s"}`] != 12 ||
		r.Values[`{"metric":"system.entropy_avail"}`] != 256 {
		t.Errorf("values: %v", r.Values)
	}
}

// TestSystemReal scans the machine: the main series are there, with no problem.
func TestSystemReal(t *testing.T) {
	s := NewSystem(Options{})
	defer s.Close()
	r := series.NewRecorder()
	for range 2 {
		if err := s.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	for _, k := range []string{
		`{"metric":"vmstat.pgfault"}`, `{"metric":"vmstat.oom_kill"}`, `{"metric":"vmstat.nr_free_pages"}`,
		`{"metric":"sockstat.sockets.used"}`, `{"metric":"sockstat.TCP.inuse"}`, `{"metric":"timex.sync_status"}`,
		`{"metric":"timex.tick_s"}`, `{"metric":"system.boot_time_s"}`, `{"metric":"system.entropy_avail"}`,
		`{"interface":"lo","metric":"net.interface.up"}`, `{"interface":"lo","metric":"net.interface.mtu"}`,
		`{"cpu":"0","metric":"softnet.processed"}`,
	} {
		if _, ok := r.Values[k]; !ok {
			t.Errorf("%s: missing", k)
		}
	}
	if _, err := os.Stat("/proc/pressure/io"); err == nil {
		if _, ok := r.Values[`{"metric":"pressure.io.some_us"}`]; !ok {
			t.Errorf("pressure.io.some_us missing with /proc/pressure/io present")
		}
	}
	if _, err := os.Stat("/proc/net/snmp6"); err == nil {
		if _, ok := r.Values[`{"metric":"net.Ip6.InReceives"}`]; !ok {
			t.Errorf("net.Ip6.InReceives missing with /proc/net/snmp6 present")
		}
	}
	if math.Float64frombits(r.Values[`{"metric":"timex.tick_s"}`]) <= 0 {
		t.Errorf("timex.tick_s = %v", math.Float64frombits(r.Values[`{"metric":"timex.tick_s"}`]))
	}
}

// TestSockstatMatchesFile compares the collected sockstat values with the file read just
// before and just after the scan: each must lie between the two readings.
func TestSockstatMatchesFile(t *testing.T) {
	read := func() map[string]int64 {
		m := map[string]int64{}
		for _, f := range []string{"/proc/net/sockstat", "/proc/net/sockstat6"} {
			b, err := os.ReadFile(f)
			if err != nil {
				if f == "/proc/net/sockstat6" && os.IsNotExist(err) {
					continue
				}
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				fs := strings.Fields(line)
				proto := strings.TrimSuffix(fs[0], ":")
				for i := 1; i+1 < len(fs); i += 2 {
					v, err := strconv.ParseInt(fs[i+1], 10, 64)
					if err != nil {
						t.Fatalf("%s: %q: %v", f, line, err)
					}
					m["sockstat."+proto+"."+fs[i]] = v
				}
			}
		}
		return m
	}
	s := NewSystem(Options{})
	defer s.Close()
	r := series.NewRecorder()
	before := read()
	if err := s.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	after := read()
	if len(before) < 5 {
		t.Fatalf("only %d values in sockstat: %v", len(before), before)
	}
	for name, b := range before {
		a := after[name]
		got, ok := r.Values[`{"metric":"`+name+`"}`]
		if !ok {
			t.Errorf("%s: not collected", name)
			continue
		}
		v := int64(got)
		if v < min(a, b) || v > max(a, b) {
			t.Errorf("%s = %d, file said %d before and %d after", name, v, b, a)
		}
	}
}

// TestNetClassVanish: the series of an interface that disappears stop, its descriptors are
// closed, and one that appears is read at once (its rare attributes included).
func TestNetClassVanish(t *testing.T) {
	sys := t.TempDir()
	mk := func(name, mtu string) {
		d := sys + "/class/net/" + name
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"operstate": "up", "carrier": "1", "flags": "0x1003", "mtu": mtu} {
			if err := os.WriteFile(d+"/"+f, []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("a0", "1500")
	s := NewSystem(Options{Proc: "testdata/proc", Sys: sys})
	defer s.Close()
	scan := func() *series.Recorder {
		r := series.NewRecorder()
		if err := s.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	scan()
	mk("b0", "9000")
	r := scan() // not a rare scan: b0 is new, so all of it is read
	if r.Values[`{"interface":"b0","metric":"net.interface.mtu"}`] != 9000 || r.Values[`{"interface":"a0","metric":"net.interface.mtu"}`] != 1500 {
		t.Errorf("mtu: %v", r.Values)
	}
	if s.nc.kept != 2*ncKept {
		t.Errorf("%d kept descriptors, want %d", s.nc.kept, 2*ncKept)
	}
	if err := os.RemoveAll(sys + "/class/net/a0"); err != nil {
		t.Fatal(err)
	}
	r = scan()
	for k := range r.Values {
		if strings.Contains(k, `"a0"`) {
			t.Errorf("%s written after a0 went", k)
		}
	}
	if len(s.nc.ifs) != 1 || s.nc.kept != ncKept {
		t.Errorf("interfaces %d, kept descriptors %d after a0 went", len(s.nc.ifs), s.nc.kept)
	}
}

// TestSystemSteadyScanAllocs: once its series are registered, a scan that is not one of the
// every-15th (uname, os-release, clock sources, disk identities) allocates nothing.
func TestSystemSteadyScanAllocs(t *testing.T) {
	opt := fixtureOptions()
	opt.Udev = "testdata/run/udev"
	s := NewSystem(opt)
	defer s.Close()
	sink := &series.Discard{}
	ctx := context.Background()
	for range rareEvery { // scans 1..15: the first registers everything
		if err := s.Collect(ctx, sink); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Collect(ctx, sink); err != nil { // scan 16: rare
		t.Fatal(err)
	}
	// scans 17..30, every-5th ones (UDP, ARP, thermal) included
	allocs := testing.AllocsPerRun(rareEvery-2, func() {
		if err := s.Collect(ctx, sink); err != nil {
			t.Fatal(err)
		}
	})
	if s.gen%rareEvery == 1 {
		t.Fatalf("the measured scans reached a rare scan (gen %d)", s.gen)
	}
	if allocs != 0 {
		t.Errorf("%.1f allocations per steady scan", allocs)
	}
}

// TestHwmonForgetsRemovedChip: a chip (and its sensors' labels) gone from /sys/class/hwmon at
// a listing is dropped from the state kept between listings, and its states are not written.
func TestHwmonForgetsRemovedChip(t *testing.T) {
	sys := t.TempDir()
	if err := os.MkdirAll(sys+"/class/hwmon", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"hwmon1", "devices/platform/coretemp.0/hwmon/hwmon1"}, {"hwmon2", "devices/virtual/hwmon/hwmon2"}} {
		target, err := filepath.Abs("testdata/sys/" + l[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, sys+"/class/hwmon/"+l[0]); err != nil {
			t.Fatal(err)
		}
	}
	h := newHwmon()
	r := series.NewRecorder()
	h.list(sys, r)
	if len(h.chips) != 2 || len(h.labels) != 1 {
		t.Fatalf("first listing: %d chips, %d labels; want 2 and 1", len(h.chips), len(h.labels))
	}
	if err := os.Remove(sys + "/class/hwmon/hwmon1"); err != nil { // coretemp, the labelled one
		t.Fatal(err)
	}
	h.list(sys, r)
	if len(h.chips) != 1 || len(h.labels) != 0 {
		t.Errorf("after coretemp went: chips %v, labels %v; want acpitz only", slices.Collect(maps.Keys(h.chips)), slices.Collect(maps.Keys(h.labels)))
	}
	if _, ok := h.chips["platform_coretemp_0"]; ok {
		t.Error("coretemp's chip state kept after it went")
	}
}

// TestHwmonDeviceLayoutAndAlarms: a chip whose sensors are in hwmon<N>/device (older drivers)
// gives their series; fan_min, the alarms and temp crit_alarm (scaled as node_exporter does)
// are read; a file in both hwmon<N> and device/ is one series, with hwmon<N>'s value.
func TestHwmonDeviceLayoutAndAlarms(t *testing.T) {
	sys := t.TempDir()
	for k, v := range map[string]string{"class/hwmon/hwmon3/device/fan1_input": "900", "class/hwmon/hwmon3/device/fan1_min": "500",
		"class/hwmon/hwmon3/device/fan1_alarm": "1", "class/hwmon/hwmon3/temp1_input": "40000",
		"class/hwmon/hwmon3/device/temp1_input": "99000", "class/hwmon/hwmon3/temp1_crit_alarm": "1", "class/net/.keep": ""} {
		p := filepath.Join(sys, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSystem(Options{Proc: "testdata/proc", Sys: sys, PageSize: 4096})
	defer s.Close()
	r := series.NewRecorder()
	if err := s.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	key := func(m, sensor string) string {
		return `{"chip":"hwmon3_device","metric":"hwmon.` + m + `","sensor":"` + sensor + `"}`
	}
	for k, v := range map[string]uint64{
		key("fan_rpm", "fan1"): 900, key("fan_min_rpm", "fan1"): 500, key("fan_alarm", "fan1"): 1,
		key("temp_c", "temp1"): math.Float64bits(40), key("temp_crit_alarm", "temp1"): math.Float64bits(0.001),
	} {
		if g, ok := r.Values[k]; !ok || g != v {
			t.Errorf("%s = %d (present %v), want %d", k, g, ok, v)
		}
	}
	n := 0
	for k := range r.Values {
		if strings.Contains(k, `"hwmon.`) {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d hwmon series, want 5: %v", n, r.Values)
	}
}
