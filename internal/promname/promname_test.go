package promname

import (
	"reflect"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestMapMachine(t *testing.T) {
	m := New(Options{})
	for _, tc := range []struct {
		labels series.Labels
		kind   series.Kind
		name   string
		typ    Type
		out    []Label
		in, v  float64
	}{
		{series.Labels{"metric": "cpu.user_ms", "cpu": "0"}, series.Counter, "node_cpu_seconds_total", Counter,
			[]Label{{"cpu", "0"}, {"mode", "user"}}, 123456, 123.456},
		{series.Labels{"metric": "cpu.guest_nice_ms", "cpu": "1"}, series.Counter, "node_cpu_guest_seconds_total", Counter,
			[]Label{{"cpu", "1"}, {"mode", "nice"}}, 10, 0.01},
		{series.Labels{"metric": "memory.Active(anon)"}, series.Level, "node_memory_Active_anon_bytes", Gauge, nil, 4096, 4096},
		{series.Labels{"metric": "memory.HugePages_Total"}, series.Level, "node_memory_HugePages_Total", Gauge, nil, 2, 2},
		{series.Labels{"metric": "net.interface.rx.bytes", "interface": "eth0"}, series.Counter, "node_network_receive_bytes_total", Counter,
			[]Label{{"device", "eth0"}}, 7, 7},
		{series.Labels{"metric": "net.Tcp.RetransSegs"}, series.Counter, "node_netstat_Tcp_RetransSegs", Untyped, nil, 3, 3},
		{series.Labels{"metric": "disk.discard.bytes", "device": "vda"}, series.Counter, "node_disk_discarded_sectors_total", Counter,
			[]Label{{"device", "vda"}}, 1024, 2},
		{series.Labels{"metric": "process.memory.rss", "pid": "1", "process": "init"}, series.Level, "cantal_process_memory_bytes", Gauge,
			[]Label{{"memtype", "resident"}, {"pid", "1"}, {"process", "init"}}, 1, 1},
		{series.Labels{"metric": "requests.number", "pid": "7"}, series.Counter, "requests_number_total", Counter,
			[]Label{{"pid", "7"}}, 5, 5},
		// An application's series named like a machine one keeps the application naming.
		{series.Labels{"metric": "cpu.user_ms", "cpu": "0", "pid": "7"}, series.Counter, "cpu_user_ms_total", Counter,
			[]Label{{"cpu", "0"}, {"pid", "7"}}, 5, 5},
		{series.Labels{"metric": "system.load_avg_1min"}, series.Level, "system_load_avg_1min", Gauge, nil, 5, 5},
	} {
		s, ok := m.Map(tc.labels, tc.kind)
		if !ok {
			t.Errorf("%v: not exported", tc.labels)
			continue
		}
		if s.Name != tc.name || s.Type != tc.typ || !reflect.DeepEqual(s.Labels, tc.out) {
			t.Errorf("%v: got %s %v %v, want %s %v %v", tc.labels, s.Name, s.Type, s.Labels, tc.name, tc.typ, tc.out)
		}
		if v := s.Value(tc.in); v != tc.v {
			t.Errorf("%v: value %v → %v, want %v", tc.labels, tc.in, v, tc.v)
		}
	}
}

func TestMapLeftOut(t *testing.T) {
	m := New(Options{})
	for _, l := range []series.Labels{
		{"metric": "cpu.user_ms"},                     // all-CPU: not with the per-CPU series
		{"metric": "disk.read.ops", "device": "vda1"}, // partition
		{"metric": "disk.read.ops", "device": "loop0"},
		{"metric": "net.Tcp.RtoMin"}, // not in node_exporter's default netstat fields
	} {
		if s, ok := m.Map(l, series.Counter); ok {
			t.Errorf("%v exported as %s", l, s.Name)
		}
	}
	if _, ok := m.Map(series.Labels{"metric": "disk.read.ops", "device": "nvme0n1"}, series.Counter); !ok {
		t.Error("nvme0n1 left out")
	}
}

func TestMapNewCollectors(t *testing.T) {
	m := New(Options{})
	for _, tc := range []struct {
		labels series.Labels
		kind   series.Kind
		name   string
		out    []Label
		in, v  float64
	}{
		{series.Labels{"metric": "system.boot_time_s"}, series.Level, "node_boot_time_seconds", nil, 1e9, 1e9},
		{series.Labels{"metric": "pressure.io.full_us"}, series.Counter, "node_pressure_io_stalled_seconds_total", nil, 1500000, 1.5},
		{series.Labels{"metric": "pressure.cpu.some_avg10"}, series.Float, "cantal_pressure_ratio",
			[]Label{{"kind", "some"}, {"resource", "cpu"}, {"window", "10s"}}, 12.5, 0.125},
		{series.Labels{"metric": "vmstat.pgmajfault"}, series.Counter, "node_vmstat_pgmajfault", nil, 3, 3},
		{series.Labels{"metric": "sockstat.TCP.mem_bytes"}, series.Level, "node_sockstat_TCP_mem_bytes", nil, 3, 3},
		{series.Labels{"metric": "sockstat.sockets.used"}, series.Level, "node_sockstat_sockets_used", nil, 3, 3},
		{series.Labels{"metric": "net.Ip6.InOctets"}, series.Counter, "node_netstat_Ip6_InOctets", nil, 3, 3},
		{series.Labels{"metric": "fs.avail", "device": "/dev/vda1", "mountpoint": "/", "fstype": "ext4"}, series.Level, "node_filesystem_avail_bytes",
			[]Label{{"device", "/dev/vda1"}, {"fstype", "ext4"}, {"mountpoint", "/"}}, 3, 3},
		{series.Labels{"metric": "net.interface.info", "interface": "lo", "address": "00", "duplex": ""}, series.State, "node_network_info",
			[]Label{{"address", "00"}, {"device", "lo"}, {"duplex", ""}}, 0, 0},
		{series.Labels{"metric": "hwmon.temp_c", "chip": "platform_coretemp_0", "sensor": "temp1"}, series.Float, "node_hwmon_temp_celsius",
			[]Label{{"chip", "platform_coretemp_0"}, {"sensor", "temp1"}}, 45.5, 45.5},
		{series.Labels{"metric": "ingest.statsd.lines"}, series.Counter, "cantal_ingest_statsd_lines_total", nil, 3, 3},
		{series.Labels{"metric": "ingest.bytes"}, series.Level, "cantal_ingest_bytes", nil, 3, 3},
		{series.Labels{"metric": "timex.pps_jitter_count"}, series.Counter, "node_timex_pps_jitter_total", nil, 3, 3},
	} {
		s, ok := m.Map(tc.labels, tc.kind)
		if !ok || s.Name != tc.name || !reflect.DeepEqual(s.Labels, tc.out) {
			t.Errorf("%v: got %v %s %v, want %s %v", tc.labels, ok, s.Name, s.Labels, tc.name, tc.out)
			continue
		}
		if v := s.Value(tc.in); v != tc.v {
			t.Errorf("%v: value %v → %v, want %v", tc.labels, tc.in, v, tc.v)
		}
	}
	if _, ok := m.Map(series.Labels{"metric": "vmstat.nr_free_pages"}, series.Level); ok {
		t.Error("vmstat.nr_free_pages exported; node_exporter leaves it out by default")
	}
}

func TestMapExtra(t *testing.T) {
	m := New(Options{})
	l := series.Labels{"metric": "system.os", "name": "Debian GNU/Linux", "id": "debian", "id_like": "", "version_id": "12.4.1", "pretty_name": "x"}
	var s Series
	v, ok := m.MapExtra(&s, l, series.State)
	want := []Label{{"id", "debian"}, {"id_like", ""}, {"name", "Debian GNU/Linux"}}
	if !ok || v != 12.4 || s.Name != "node_os_version" || !reflect.DeepEqual(s.Labels, want) {
		t.Errorf("got %v %v %s %v", v, ok, s.Name, s.Labels)
	}
	l["version_id"] = "rolling"
	if _, ok := m.MapExtra(&s, l, series.State); ok {
		t.Error("a version_id that is no number gave node_os_version")
	}
	if _, ok := m.MapExtra(&s, series.Labels{"metric": "system.uname"}, series.State); ok {
		t.Error("system.uname has an extra series")
	}
}

func TestMapState(t *testing.T) {
	m := New(Options{})
	s, _ := m.Map(series.Labels{"metric": "worker.state", "state": "x", "pid": "1"}, series.State)
	want := []Label{{"pid", "1"}, {"state_", "x"}}
	if s.Type != Info || !reflect.DeepEqual(s.Labels, want) {
		t.Errorf("got %v %v", s.Type, s.Labels)
	}
}

func TestMapIntoNoAlloc(t *testing.T) {
	m := New(Options{})
	l := series.Labels{"metric": "cpu.user_ms", "cpu": "0"}
	var s Series
	m.MapInto(&s, l, series.Counter)
	if n := testing.AllocsPerRun(100, func() { m.MapInto(&s, l, series.Counter) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// The md, schedstat, thermal, bonding and cpufreq series under node_exporter 1.5's names, labels, types and
// units (issue 36), values as node_exporter writes them for the same files.
func TestMapBareMetalAsNodeExporter(t *testing.T) {
	m := New(Options{})
	for _, tc := range []struct {
		labels series.Labels
		kind   series.Kind
		name   string
		typ    Type
		out    []Label
		in, v  float64
	}{
		{series.Labels{"metric": "md.state", "device": "md1", "state": "recovering"}, series.Level, "node_md_state", Gauge,
			[]Label{{"device", "md1"}, {"state", "recovering"}}, 1, 1},
		{series.Labels{"metric": "md.disks", "device": "md1", "state": "failed"}, series.Level, "node_md_disks", Gauge,
			[]Label{{"device", "md1"}, {"state", "failed"}}, 1, 1},
		{series.Labels{"metric": "md.disks", "device": "md1", "state": "down"}, series.Level, "cantal_md_disks_down", Gauge,
			[]Label{{"device", "md1"}}, 1, 1},
		{series.Labels{"metric": "md.disks_required", "device": "md1"}, series.Level, "node_md_disks_required", Gauge,
			[]Label{{"device", "md1"}}, 3, 3},
		{series.Labels{"metric": "md.blocks", "device": "md1"}, series.Level, "node_md_blocks", Gauge,
			[]Label{{"device", "md1"}}, 1953260544, 1953260544},
		{series.Labels{"metric": "md.blocks_synced", "device": "md1"}, series.Level, "node_md_blocks_synced", Gauge,
			[]Label{{"device", "md1"}}, 83034112, 83034112},
		{series.Labels{"metric": "schedstat.running_ns", "cpu": "0"}, series.Counter, "node_schedstat_running_seconds_total", Counter,
			[]Label{{"cpu", "0"}}, 2045936778163039, 2045936778163039 / 1e9},
		{series.Labels{"metric": "schedstat.waiting_ns", "cpu": "1"}, series.Counter, "node_schedstat_waiting_seconds_total", Counter,
			[]Label{{"cpu", "1"}}, 364107263788241, 364107.263788241},
		{series.Labels{"metric": "schedstat.timeslices", "cpu": "1"}, series.Counter, "node_schedstat_timeslices_total", Counter,
			[]Label{{"cpu", "1"}}, 5145567945, 5145567945},
		{series.Labels{"metric": "thermal.zone.temp_c", "zone": "0", "type": "x86_pkg_temp"}, series.Float, "node_thermal_zone_temp", Gauge,
			[]Label{{"type", "x86_pkg_temp"}, {"zone", "0"}}, 52.5, 52.5},
		{series.Labels{"metric": "thermal.cooling.cur_state", "name": "1", "type": "intel_powerclamp"}, series.Level, "node_cooling_device_cur_state", Gauge,
			[]Label{{"name", "1"}, {"type", "intel_powerclamp"}}, 1, 1},
		{series.Labels{"metric": "thermal.cooling.max_state", "name": "1", "type": "intel_powerclamp"}, series.Level, "node_cooling_device_max_state", Gauge,
			[]Label{{"name", "1"}, {"type", "intel_powerclamp"}}, 50, 50},
		{series.Labels{"metric": "bonding.slaves", "master": "bond0"}, series.Level, "node_bonding_slaves", Gauge,
			[]Label{{"master", "bond0"}}, 2, 2},
		{series.Labels{"metric": "bonding.active", "master": "bond0"}, series.Level, "node_bonding_active", Gauge,
			[]Label{{"master", "bond0"}}, 1, 1},
		{series.Labels{"metric": "cpufreq.cur_hz", "cpu": "3"}, series.Level, "node_cpu_frequency_hertz", Gauge,
			[]Label{{"cpu", "3"}}, 2.4e9, 2.4e9},
		{series.Labels{"metric": "cpufreq.scaling_max_hz", "cpu": "3"}, series.Level, "node_cpu_scaling_frequency_max_hertz", Gauge,
			[]Label{{"cpu", "3"}}, 3.6e9, 3.6e9},
	} {
		s, ok := m.Map(tc.labels, tc.kind)
		if !ok {
			t.Errorf("%v: not exported", tc.labels)
			continue
		}
		if s.Name != tc.name || s.Type != tc.typ || !reflect.DeepEqual(s.Labels, tc.out) || !s.Machine {
			t.Errorf("%v: got %s %v %v machine=%v, want %s %v %v", tc.labels, s.Name, s.Type, s.Labels, s.Machine, tc.name, tc.typ, tc.out)
		}
		if v := s.Value(tc.in); v != tc.v {
			t.Errorf("%v: value %v → %v, want %v", tc.labels, tc.in, v, tc.v)
		}
	}
}

// A series of the textfile collector keeps its own name, labels (camelCase and all) and its
// file's type; the collector's own series are node_exporter's.
func TestMapTextfileVerbatim(t *testing.T) {
	m := New(Options{TextfileType: func(name string) (Type, bool) {
		if name == "backupRuns_total" {
			return Counter, true
		}
		return 0, false
	}})
	s, ok := m.Map(series.Labels{"metric": "backupRuns_total", "textfile": "/var/lib/t/b.prom", "jobName": "db", "empty": ""}, series.Float)
	if !ok || s.Name != "backupRuns_total" || s.Type != Counter || !reflect.DeepEqual(s.Labels, []Label{{"jobName", "db"}}) ||
		s.Machine || s.Help != "Metric read from /var/lib/t/b.prom" {
		t.Errorf("textfile series: %+v %v", s, ok)
	}
	s, _ = m.Map(series.Labels{"metric": "node_memory_MemFree_bytes", "textfile": "/t/a.prom"}, series.Float)
	if s.Name != "node_memory_MemFree_bytes" || s.Type != Gauge {
		t.Errorf("untyped textfile series: %+v", s)
	}
	// Not the collector's: an application's series with a label textfile but an invalid name,
	// or a pushed one, is named by the application rule.
	s, _ = m.Map(series.Labels{"metric": "requests.count", "textfile": "x"}, series.Float)
	if s.Name != "requests_count" {
		t.Errorf("application series with a textfile label: %+v", s)
	}
	s, _ = m.Map(series.Labels{"metric": "fooBar", "textfile": "x", "source": "push"}, series.Float)
	if s.Name != "foo_bar" {
		t.Errorf("pushed series with a textfile label: %+v", s)
	}
	s, _ = m.Map(series.Labels{"metric": "textfile.mtime_s", "file": "/t/a.prom"}, series.Float)
	if s.Name != "node_textfile_mtime_seconds" || !reflect.DeepEqual(s.Labels, []Label{{"file", "/t/a.prom"}}) {
		t.Errorf("mtime: %+v", s)
	}
	s, _ = m.Map(series.Labels{"metric": "textfile.scrape_error"}, series.Level)
	if s.Name != "node_textfile_scrape_error" || s.Type != Gauge {
		t.Errorf("scrape_error: %+v", s)
	}
}
