package promname

import (
	"math"
	"regexp"
	"strings"

	"github.com/cantal-go/cantal/internal/series"
)

// rule maps one Cantal machine metric name to its Prometheus series. A series matches a rule
// only when its labels are exactly "metric" plus the rule's labels (optional ones may be
// missing) and its kind is the rule's: an application that names a metric cpu.user_ms keeps
// its own name.
type rule struct {
	name     string
	typ      Type
	kind     series.Kind // 0: any
	scale    float64
	clock    bool
	empty    bool // labels with empty values are written (node_exporter's info series have them)
	process  bool
	help     string
	from     []string // Cantal label names, besides metric
	to       []string // their Prometheus names, same order
	optional []bool   // from[i] may be missing
	consts   []Label
	disk     bool   // label "device" is checked against DiskDevicesExclude
	netdev   bool   // label "interface" is checked against NetDevicesExclude
	drop     bool   // the series is not exported
	self     string // the agent's own series: its name as a counter (name is the gauge's)
	extra    *rule  // a second series the same Cantal series gives (see Mapper.MapExtra)
	cadv     *rule  // the cAdvisor family a container's series is also exported as (see Mapper.MapCAdvisor)
	valueOf  string // extra: the label whose number is the value
	dropBare bool   // the series with no label but metric is not exported (all-CPU cpu.*)
	// alt, when set, returns the rule that names a matching series instead of this one (nil:
	// this one), by its labels: md.disks{state="down"}, which node_exporter 1.5 does not have.
	alt func(series.Labels) *rule
}

// mdDisksDown is md.disks{state="down"}: array members missing ("_" in "[UU_]").
var mdDisksDown = r("cantal_md_disks_down", Gauge, series.Level, 1, "Members missing from the array (\"_\" in \"[UU_]\" of /proc/mdstat).", []string{"device"})

func (r *rule) matches(l series.Labels, kind series.Kind) bool {
	if r.kind != 0 && r.kind != kind {
		return false
	}
	n := 1
	for i, f := range r.from {
		if _, ok := l[f]; ok {
			n++
		} else if !r.optional[i] {
			return false
		}
	}
	return n == len(l)
}

func (r *rule) skip(m *Mapper, l series.Labels) bool {
	return (r.disk && m.opt.DiskDevicesExclude(l["device"])) || (r.netdev && m.opt.NetDevicesExclude(l["interface"]))
}

func (r *rule) series() Series {
	s := Series{Name: r.name, Type: r.typ, Scale: r.scale, Clock: r.clock, Process: r.process, Machine: true, Help: r.help}
	if r.scale > 0 && r.scale < 1 {
		d := math.Round(1 / r.scale) // 1/1e-9 is 999999999.9999999 in float64
		if 1/d == r.scale {
			s.div = d
		}
	}
	return s
}

func (r *rule) appendLabels(dst []Label, l series.Labels) []Label {
	for i, f := range r.from {
		if v, ok := l[f]; ok && (v != "" || r.empty) {
			dst = append(dst, Label{r.to[i], v})
		}
	}
	return append(dst, r.consts...)
}

// DefaultDiskDeviceExclude is node_exporter 1.5's default --collector.diskstats.device-exclude:
// RAM disks, loop devices, floppies and partitions of sd/hd/vd/xvd and NVMe disks.
func DefaultDiskDeviceExclude(device string) bool { return diskExclude.MatchString(device) }

// DefaultNetDeviceExclude is node_exporter 1.5's default --collector.netdev.device-exclude:
// the loopback interface lo.
func DefaultNetDeviceExclude(device string) bool { return device == "lo" }

var diskExclude = regexp.MustCompile(`^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$`)

// netstatFields is node_exporter 1.5's default --collector.netstat.fields, applied to
// "<Group>_<Name>".
var netstatFields = regexp.MustCompile(`^(.*_(InErrors|InErrs)|Ip_Forwarding|Ip(6|Ext)_(InOctets|OutOctets)|Icmp6?_(InMsgs|OutMsgs)|TcpExt_(Listen.*|Syncookies.*|TCPSynRetrans|TCPTimeouts)|Tcp_(ActiveOpens|InSegs|OutSegs|OutRsts|PassiveOpens|RetransSegs|CurrEstab)|Udp6?_(InDatagrams|OutDatagrams|NoPorts|RcvbufErrors|SndbufErrors))$`)

// lookup returns the machine rule of a metric name, or nil when the name has none (an
// application's metric, or a machine series /metrics leaves out). The result is shared.
func (m *Mapper) lookup(metric string) *rule {
	if r, ok := fixedRules[metric]; ok {
		return r
	}
	m.mu.RLock()
	r, ok := m.rules[metric]
	m.mu.RUnlock()
	if ok {
		return r
	}
	r = dynamicRule(metric)
	m.mu.Lock()
	if len(m.rules) >= maxCached {
		clear(m.rules)
	}
	m.rules[metric] = r
	m.mu.Unlock()
	return r
}

// dynamicRule makes the rule of a metric whose name carries a kernel field name: memory.<Field>
// and net.<Group>.<Name>.
func dynamicRule(metric string) *rule {
	switch {
	case strings.HasPrefix(metric, "memory."):
		// node_exporter's meminfo: "Active(anon)" → "Active_anon"; fields in kB get "_bytes".
		f := metric[len("memory."):]
		if f == "" || f[0] < 'A' || f[0] > 'Z' { // the kernel's field names are capitalised
			return nil
		}
		if i := strings.IndexByte(f, '('); i >= 0 && strings.HasSuffix(f, ")") {
			f = f[:i] + "_" + f[i+1:len(f)-1]
		}
		if !validName(f) {
			return nil
		}
		name := "node_memory_" + f
		if !strings.HasPrefix(f, "HugePages_") {
			name += "_bytes"
		}
		return &rule{name: name, typ: Gauge, kind: series.Level, scale: 1,
			help: "Memory information field " + f + "."}
	case strings.HasPrefix(metric, "ingest.") || strings.HasPrefix(metric, "process_scan."):
		// The agent's own counts of its ingest and process scan.
		n := "cantal_" + Name(metric, true)
		c := n
		if !strings.HasSuffix(c, "_total") {
			c += "_total"
		}
		return &rule{name: n, self: c, typ: Gauge, scale: 1, help: "The agent's own " + metric + " (see README)."}
	case strings.HasPrefix(metric, "conntrack.stat."):
		f := metric[len("conntrack.stat."):]
		if !validName(f) {
			return nil
		}
		return &rule{name: "cantal_nf_conntrack_stat_" + f + "_total", typ: Counter, kind: series.Counter, scale: 1,
			help: "Conntrack statistic " + f + " (/proc/net/stat/nf_conntrack), summed over the CPUs."}
	case strings.HasPrefix(metric, "vmstat."):
		f := metric[len("vmstat."):]
		if !validName(f) {
			return nil
		}
		if !vmstatFields.MatchString(f) { // left out, as node_exporter does by default
			return &rule{drop: true, scale: 1}
		}
		// node_exporter types vmstat values untyped.
		return &rule{name: "node_vmstat_" + f, typ: Untyped, scale: 1, help: "/proc/vmstat information field " + f + "."}
	case strings.HasPrefix(metric, "sockstat."):
		f := strings.ReplaceAll(metric[len("sockstat."):], ".", "_")
		if !validName(f) {
			return nil
		}
		return &rule{name: "node_sockstat_" + f, typ: Gauge, kind: series.Level, scale: 1,
			help: "Number of " + f + " (/proc/net/sockstat)."}
	case strings.HasPrefix(metric, "pressure."):
		return pressureRule(metric[len("pressure."):])
	case strings.HasPrefix(metric, "net.") && strings.Count(metric, ".") == 2 && !strings.HasPrefix(metric, "net.interface."):
		f := strings.Replace(metric[len("net."):], ".", "_", 1)
		if !validName(f) {
			return nil
		}
		if !netstatFields.MatchString(f) { // left out, as node_exporter does by default
			return &rule{drop: true, scale: 1}
		}
		// node_exporter types netstat values untyped.
		return &rule{name: "node_netstat_" + f, typ: Untyped, scale: 1,
			help: "Statistic " + strings.Replace(f, "_", "", 1) + "."}
	}
	return nil
}

// vmstatFields is node_exporter 1.5's default --collector.vmstat.fields.
var vmstatFields = regexp.MustCompile(`^(oom_kill|pgpg|pswp|pg.*fault).*`)

// pressureRule names pressure.<res>.<some|full>_<us|avgN> as node_exporter's pressure
// collector does: the stall totals in seconds (node_pressure_<res>_waiting_seconds_total for
// "some", _stalled_ for "full"; node_exporter 1.5 has no full total for cpu, which is
// cantal_pressure_cpu_stalled_seconds_total here); the kernel's running averages, which
// node_exporter leaves out, are cantal_pressure_ratio{resource,kind,window} (0 to 1).
func pressureRule(f string) *rule {
	res, stat, ok := strings.Cut(f, ".")
	if !ok || (res != "cpu" && res != "memory" && res != "io" && res != "irq") {
		return nil
	}
	kind, what, ok := strings.Cut(stat, "_")
	if !ok || (kind != "some" && kind != "full") {
		return nil
	}
	switch {
	case what == "us":
		name := "node_pressure_" + res + "_waiting_seconds_total"
		help := "Total time in seconds that processes have waited for " + res + "."
		if kind == "full" {
			name = "node_pressure_" + res + "_stalled_seconds_total"
			help = "Total time in seconds no process could make progress because of " + res + "."
			if res == "cpu" || res == "irq" {
				name = "cantal_pressure_" + res + "_stalled_seconds_total"
			}
		} else if res == "irq" {
			name = "cantal_pressure_irq_waiting_seconds_total"
		}
		return &rule{name: name, typ: Counter, kind: series.Counter, scale: 1e-6, help: help}
	case strings.HasPrefix(what, "avg"):
		return &rule{name: "cantal_pressure_ratio", typ: Gauge, kind: series.Float, scale: 0.01,
			help:   "The kernel's running average of the share of time tasks were stalled, by resource, kind and window.",
			consts: []Label{{"kind", kind}, {"resource", res}, {"window", what[len("avg"):] + "s"}}}
	}
	return nil
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// r builds a rule; labels are pairs "from=to" or "from" (same name); a trailing "?" on from
// marks it optional; consts are "name=value".
func r(name string, typ Type, kind series.Kind, scale float64, help string, labels []string, consts ...string) *rule {
	ru := &rule{name: name, typ: typ, kind: kind, scale: scale, help: help}
	for _, l := range labels {
		from, to, ok := strings.Cut(l, "=")
		opt := strings.HasSuffix(from, "?")
		from = strings.TrimSuffix(from, "?")
		if !ok {
			to = from
		}
		ru.from, ru.to, ru.optional = append(ru.from, from), append(ru.to, to), append(ru.optional, opt)
	}
	for _, c := range consts {
		n, v, _ := strings.Cut(c, "=")
		ru.consts = append(ru.consts, Label{n, v})
	}
	return ru
}

const ms = 0.001

var (
	cpuLabels  = []string{"cpu"}
	netLabels  = []string{"interface=device"}
	diskLabels = []string{"device"}
	procLabels = []string{"pid", "process", "cgroup?", "container?", "image?", "container_id?", "pod?", "namespace?"}
	// A container's cgroup series also carry its identity (internal/containers).
	cgLabels = []string{"cgroup", "container?", "image?", "container_id?", "pod?", "namespace?"}
)

// fixedRules are the rules of the machine's fixed metric names. Built once; never modified.
var fixedRules = func() map[string]*rule {
	m := map[string]*rule{}
	add := func(metric string, ru *rule) { m[metric] = ru }
	// /proc/stat: per-CPU only (the all-CPU series have no cpu label and match no rule).
	for _, mode := range []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"} {
		add("cpu."+mode+"_ms", r("node_cpu_seconds_total", Counter, series.Counter, ms,
			"Seconds the CPUs spent in each mode.", cpuLabels, "mode="+mode))
	}
	add("cpu.guest_ms", r("node_cpu_guest_seconds_total", Counter, series.Counter, ms,
		"Seconds the CPUs spent in guests (VMs) for each mode.", cpuLabels, "mode=user"))
	add("cpu.guest_nice_ms", r("node_cpu_guest_seconds_total", Counter, series.Counter, ms,
		"Seconds the CPUs spent in guests (VMs) for each mode.", cpuLabels, "mode=nice"))
	for k, ru := range m {
		if strings.HasPrefix(k, "cpu.") {
			ru.dropBare = true
		}
	}
	add("system.context_switches", r("node_context_switches_total", Counter, series.Counter, 1, "Total number of context switches.", nil))
	add("system.interrupts", r("node_intr_total", Counter, series.Counter, 1, "Total number of interrupts serviced.", nil))
	add("system.softirqs", r("cantal_softirqs_total", Counter, series.Counter, 1, "Softirqs serviced since boot (/proc/stat softirq).", nil))
	add("system.forks", r("node_forks_total", Counter, series.Counter, 1, "Total number of forks.", nil))
	add("system.procs_running", r("node_procs_running", Gauge, series.Level, 1, "Number of processes in runnable state.", nil))
	add("system.procs_blocked", r("node_procs_blocked", Gauge, series.Level, 1, "Number of processes blocked waiting for I/O to complete.", nil))
	add("system.load_avg_1min", r("node_load1", Gauge, series.Float, 1, "1m load average.", nil))
	add("system.load_avg_5min", r("node_load5", Gauge, series.Float, 1, "5m load average.", nil))
	add("system.load_avg_15min", r("node_load15", Gauge, series.Float, 1, "15m load average.", nil))
	add("system.tasks_runnable", r("cantal_tasks_runnable", Gauge, series.Level, 1, "Scheduling entities runnable now (/proc/loadavg).", nil))
	add("system.tasks_total", r("cantal_tasks", Gauge, series.Level, 1, "Scheduling entities (threads) that exist (/proc/loadavg).", nil))
	up := r("cantal_uptime_seconds", Gauge, series.Float, 1, "Time since boot (/proc/uptime).", nil)
	up.clock = true
	add("system.uptime_s", up)
	add("system.boot_time_s", r("node_boot_time_seconds", Gauge, series.Level, 1, "Node boot time, in unixtime.", nil))
	add("system.entropy_avail", r("node_entropy_available_bits", Gauge, series.Level, 1, "Bits of available entropy.", nil))
	add("system.entropy_pool_size", r("node_entropy_pool_size_bits", Gauge, series.Level, 1, "Bits of entropy pool.", nil))
	info := func(metric, name, help string, labels ...string) {
		ls := make([]string, len(labels))
		for i, l := range labels {
			from, to, ok := strings.Cut(l, "=")
			if ok {
				ls[i] = from + "?=" + to
			} else {
				ls[i] = l + "?"
			}
		}
		ru := r(name, Info, series.State, 1, help, ls)
		ru.empty = true
		add(metric, ru)
	}
	info("system.uname", "node_uname_info", "Labeled system information as provided by the uname system call.",
		"sysname", "release", "version", "machine", "nodename", "domainname")
	info("system.os", "node_os_info", "A metric with a constant '1' value labeled by build_id, id, id_like, image_id, image_version, name, pretty_name, variant, variant_id, version, version_codename, version_id.",
		"name", "id", "id_like", "pretty_name", "version", "version_id", "version_codename", "build_id", "variant", "variant_id", "image_id", "image_version")
	osv := r("node_os_version", Gauge, series.State, 1, "Metric containing the major.minor part of the OS version.", []string{"id?", "id_like?", "name?"})
	osv.empty, osv.valueOf = true, "version_id"
	m["system.os"].extra = osv
	info("net.interface.info", "node_network_info", "Non-numeric data from /sys/class/net/<iface>, value is always 1.",
		"interface=device", "address", "broadcast", "duplex", "operstate", "ifalias")

	// /sys/class/net, as node_exporter's netclass collector (lo included, as its default).
	for cantal, ne := range map[string]struct {
		name string
		typ  Type
	}{
		"up": {"node_network_up", Gauge}, "carrier": {"node_network_carrier", Gauge},
		"carrier_changes":      {"node_network_carrier_changes_total", Counter},
		"carrier_up_changes":   {"node_network_carrier_up_changes_total", Counter},
		"carrier_down_changes": {"node_network_carrier_down_changes_total", Counter},
		"mtu":                  {"node_network_mtu_bytes", Gauge}, "speed": {"node_network_speed_bytes", Gauge},
		"tx_queue_len": {"node_network_transmit_queue_length", Gauge}, "flags": {"node_network_flags", Gauge},
		"dormant": {"node_network_dormant", Gauge}, "protocol": {"node_network_protocol_type", Gauge},
		"iface_id": {"node_network_iface_id", Gauge}, "iface_link": {"node_network_iface_link", Gauge},
		"iface_link_mode":     {"node_network_iface_link_mode", Gauge},
		"address_assign_type": {"node_network_address_assign_type", Gauge},
		"name_assign_type":    {"node_network_name_assign_type", Gauge},
		"device_id":           {"node_network_device_id", Gauge}, "net_dev_group": {"node_network_net_dev_group", Gauge},
	} {
		kind := series.Level
		if ne.typ == Counter {
			kind = series.Counter
		}
		add("net.interface."+cantal, r(ne.name, ne.typ, kind, 1, "Network device property "+cantal+" (/sys/class/net).", netLabels))
	}

	// Connection tracking, the kernel clock: node_exporter's conntrack and timex collectors.
	add("conntrack.entries", r("node_nf_conntrack_entries", Gauge, series.Level, 1, "Number of currently allocated flow entries for connection tracking.", nil))
	add("conntrack.entries_limit", r("node_nf_conntrack_entries_limit", Gauge, series.Level, 1, "Maximum size of connection tracking table.", nil))
	for cantal, ne := range map[string]struct {
		name string
		typ  Type
		help string
	}{
		"sync_status":                  {"node_timex_sync_status", Gauge, "Is clock synchronized to a reliable server (1 = yes, 0 = no)."},
		"offset_s":                     {"node_timex_offset_seconds", Gauge, "Time offset in between local system and reference clock."},
		"frequency_adjustment_ratio":   {"node_timex_frequency_adjustment_ratio", Gauge, "Local clock frequency adjustment."},
		"maxerror_s":                   {"node_timex_maxerror_seconds", Gauge, "Maximum error in seconds."},
		"esterror_s":                   {"node_timex_estimated_error_seconds", Gauge, "Estimated error in seconds."},
		"status":                       {"node_timex_status", Gauge, "Value of the status array bits."},
		"constant":                     {"node_timex_loop_time_constant", Gauge, "Phase-locked loop time constant."},
		"tick_s":                       {"node_timex_tick_seconds", Gauge, "Seconds between clock ticks."},
		"pps_frequency_hz":             {"node_timex_pps_frequency_hertz", Gauge, "Pulse per second frequency."},
		"pps_jitter_s":                 {"node_timex_pps_jitter_seconds", Gauge, "Pulse per second jitter."},
		"pps_shift_s":                  {"node_timex_pps_shift_seconds", Gauge, "Pulse per second interval duration."},
		"pps_stability_hz":             {"node_timex_pps_stability_hertz", Gauge, "Pulse per second stability, average of recent frequency changes."},
		"pps_jitter_count":             {"node_timex_pps_jitter_total", Counter, "Pulse per second count of jitter limit exceeded events."},
		"pps_calibration_count":        {"node_timex_pps_calibration_total", Counter, "Pulse per second count of calibration intervals."},
		"pps_error_count":              {"node_timex_pps_error_total", Counter, "Pulse per second count of calibration errors."},
		"pps_stability_exceeded_count": {"node_timex_pps_stability_exceeded_total", Counter, "Pulse per second count of stability limit exceeded events."},
		"tai_offset_s":                 {"node_timex_tai_offset_seconds", Gauge, "International Atomic Time (TAI) offset."},
	} {
		add("timex."+cantal, r(ne.name, ne.typ, 0, 1, ne.help, nil))
	}

	// Softnet, ARP, UDP queues, conntrack statistics, clock source, time zone, SELinux, disk
	// identity: node_exporter's softnet, arp, udp_queues, conntrack, time, selinux and
	// diskstats collectors.
	for _, f := range []string{"processed", "dropped", "times_squeezed"} {
		add("softnet."+f, r("node_softnet_"+f+"_total", Counter, series.Counter, 1, "Number of softnet "+f+" packets or events, per CPU.", cpuLabels))
	}
	add("net.arp.entries", r("node_arp_entries", Gauge, series.Level, 1, "ARP entries by device", netLabels))
	add("udp.tx_queue", r("node_udp_queues", Gauge, series.Level, 1, "Number of allocated memory in the kernel for UDP datagrams in bytes.", []string{"ip"}, "queue=tx"))
	add("udp.rx_queue", r("node_udp_queues", Gauge, series.Level, 1, "Number of allocated memory in the kernel for UDP datagrams in bytes.", []string{"ip"}, "queue=rx"))
	for _, c := range []string{"found", "invalid", "ignore", "insert", "insert_failed", "drop", "early_drop", "search_restart"} {
		// node_exporter types these counters gauges.
		add("conntrack.stat."+c, r("node_nf_conntrack_stat_"+c, Gauge, series.Counter, 1, "Conntrack statistic "+c+", summed over the CPUs.", nil))
	}
	info("system.clocksource.available", "node_time_clocksource_available_info", "Available clocksources read from '/sys/devices/system/clocksource'.", "device", "clocksource")
	info("system.clocksource.current", "node_time_clocksource_current_info", "Current clocksource read from '/sys/devices/system/clocksource'.", "device", "clocksource")
	add("system.time_zone_offset_s", r("node_time_zone_offset_seconds", Gauge, series.Level, 1, "System time zone offset in seconds.", []string{"time_zone"}))
	add("selinux.enabled", r("node_selinux_enabled", Gauge, series.Level, 1, "SELinux is enabled, 1 is true, 0 is false", nil))
	add("selinux.current_mode", r("node_selinux_current_mode", Gauge, series.Level, 1, "SELinux is enforcing, 1 is true, 0 is false", nil))
	add("selinux.config_mode", r("node_selinux_config_mode", Gauge, series.Level, 1, "Configured SELinux enforcement mode", nil))
	info("disk.info", "node_disk_info", "Info of /sys/block/<block_device>.", "device", "major", "minor", "path", "wwn", "model", "serial", "revision")
	m["disk.info"].disk = true // the devices node_disk_* has
	nh := r("node_network_receive_nohandler_total", Counter, series.Counter, 1, "Network device statistic receive_nohandler.", netLabels)
	nh.netdev = true
	add("net.interface.rx.nohandler", nh)

	// Hardware sensors, as node_exporter's hwmon collector.
	hw := []string{"chip", "sensor"}
	add("hwmon.temp_c", r("node_hwmon_temp_celsius", Gauge, series.Float, 1, "Hardware monitor for temperature (input)", hw))
	add("hwmon.temp_crit_c", r("node_hwmon_temp_crit_celsius", Gauge, series.Float, 1, "Hardware monitor for temperature (crit)", hw))
	add("hwmon.temp_max_c", r("node_hwmon_temp_max_celsius", Gauge, series.Float, 1, "Hardware monitor for temperature (max)", hw))
	add("hwmon.fan_rpm", r("node_hwmon_fan_rpm", Gauge, series.Level, 1, "Hardware monitor for fan revolutions per minute (input)", hw))
	add("hwmon.in_v", r("node_hwmon_in_volts", Gauge, series.Float, 1, "Hardware monitor for voltage (input)", hw))
	add("hwmon.in_min_v", r("node_hwmon_in_min_volts", Gauge, series.Float, 1, "Hardware monitor for voltage (min)", hw))
	add("hwmon.in_max_v", r("node_hwmon_in_max_volts", Gauge, series.Float, 1, "Hardware monitor for voltage (max)", hw))
	add("hwmon.fan_min_rpm", r("node_hwmon_fan_min_rpm", Gauge, series.Level, 1, "Hardware monitor for fan revolutions per minute (min)", hw))
	add("hwmon.fan_alarm", r("node_hwmon_fan_alarm", Gauge, series.Level, 1, "Hardware sensor alarm status (fan)", hw))
	add("hwmon.in_alarm", r("node_hwmon_in_alarm", Gauge, series.Level, 1, "Hardware sensor alarm status (in)", hw))
	add("hwmon.temp_alarm", r("node_hwmon_temp_alarm", Gauge, series.Level, 1, "Hardware sensor alarm status (temp)", hw))
	// node_exporter 1.5 names temp<N>_crit_alarm as a temperature, scaled by 0.001 (1 → 0.001).
	add("hwmon.temp_crit_alarm", r("node_hwmon_temp_crit_alarm_celsius", Gauge, series.Float, 1, "Hardware monitor for temperature (crit_alarm)", hw))
	info("hwmon.chip", "node_hwmon_chip_names", "Annotation metric for human-readable chip names", "chip", "chip_name")
	info("hwmon.sensor", "node_hwmon_sensor_label", "Label for given chip and sensor", "chip", "sensor", "label")

	// Software RAID, as node_exporter 1.5's mdadm collector (/proc/mdstat). node_exporter 1.5
	// counts active, failed and spare disks only: the count of "_" in "[UU_]" (md.disks
	// state=down) is cantal_md_disks_down, so node_md_disks has exactly node_exporter's series.
	mdl := []string{"device"}
	add("md.state", r("node_md_state", Gauge, series.Level, 1, "Indicates the state of md-device.", []string{"device", "state"}))
	mdDisks := r("node_md_disks", Gauge, series.Level, 1, "Number of active/failed/spare disks of device.", []string{"device", "state"})
	mdDisks.alt = func(l series.Labels) *rule {
		if l["state"] == "down" {
			return mdDisksDown
		}
		return nil
	}
	add("md.disks", mdDisks)
	add("md.disks_required", r("node_md_disks_required", Gauge, series.Level, 1, "Total number of disks of device.", mdl))
	add("md.blocks", r("node_md_blocks", Gauge, series.Level, 1, "Total number of blocks on device.", mdl))
	add("md.blocks_synced", r("node_md_blocks_synced", Gauge, series.Level, 1, "Number of blocks synced on device.", mdl))

	// Scheduler statistics, as node_exporter's schedstat collector: seconds, not nanoseconds.
	add("schedstat.running_ns", r("node_schedstat_running_seconds_total", Counter, series.Counter, 1e-9, "Number of seconds CPU spent running a process.", cpuLabels))
	add("schedstat.waiting_ns", r("node_schedstat_waiting_seconds_total", Counter, series.Counter, 1e-9, "Number of seconds spent by processing waiting for this CPU.", cpuLabels))
	add("schedstat.timeslices", r("node_schedstat_timeslices_total", Counter, series.Counter, 1, "Number of timeslices executed by CPU.", cpuLabels))

	// Thermal zones and cooling devices, as node_exporter's thermal_zone collector.
	add("thermal.zone.temp_c", r("node_thermal_zone_temp", Gauge, series.Float, 1, "Zone temperature in Celsius", []string{"zone", "type"}))
	add("thermal.cooling.cur_state", r("node_cooling_device_cur_state", Gauge, series.Level, 1, "Current throttle state of the cooling device", []string{"name", "type"}))
	add("thermal.cooling.max_state", r("node_cooling_device_max_state", Gauge, series.Level, 1, "Maximum throttle state of the cooling device", []string{"name", "type"}))

	// Bonding interfaces, as node_exporter's bonding collector (NodeBondingDegraded's input).
	add("bonding.slaves", r("node_bonding_slaves", Gauge, series.Level, 1, "Number of configured slaves per bonding interface.", []string{"master"}))
	add("bonding.active", r("node_bonding_active", Gauge, series.Level, 1, "Number of active slaves per bonding interface.", []string{"master"}))

	// CPU frequencies, as node_exporter's cpufreq collector (Hz; sysfs has kHz).
	add("cpufreq.cur_hz", r("node_cpu_frequency_hertz", Gauge, series.Level, 1, "Current CPU thread frequency in hertz.", cpuLabels))
	add("cpufreq.min_hz", r("node_cpu_frequency_min_hertz", Gauge, series.Level, 1, "Minimum CPU thread frequency in hertz.", cpuLabels))
	add("cpufreq.max_hz", r("node_cpu_frequency_max_hertz", Gauge, series.Level, 1, "Maximum CPU thread frequency in hertz.", cpuLabels))
	add("cpufreq.scaling_cur_hz", r("node_cpu_scaling_frequency_hertz", Gauge, series.Level, 1, "Current scaled CPU thread frequency in hertz.", cpuLabels))
	add("cpufreq.scaling_min_hz", r("node_cpu_scaling_frequency_min_hertz", Gauge, series.Level, 1, "Minimum scaled CPU thread frequency in hertz.", cpuLabels))
	add("cpufreq.scaling_max_hz", r("node_cpu_scaling_frequency_max_hertz", Gauge, series.Level, 1, "Maximum scaled CPU thread frequency in hertz.", cpuLabels))

	// Power supplies, as node_exporter's powersupplyclass collector: the agent's series are
	// already in node_exporter's units, named after node_power_supply_.
	for _, n := range []string{"authentic", "calibrate", "capacity", "capacity_alert_max", "capacity_alert_min", "cyclecount",
		"online", "present", "time_to_empty_seconds", "time_to_full_seconds", "current_boot", "current_max", "current_ampere",
		"energy_empty", "energy_empty_design", "energy_full", "energy_full_design", "energy_watthour", "voltage_boot",
		"voltage_max", "voltage_max_design", "voltage_min", "voltage_min_design", "voltage_volt", "voltage_ocv",
		"charge_control_limit", "charge_control_limit_max", "charge_counter", "charge_empty", "charge_empty_design",
		"charge_full", "charge_full_design", "charge_ampere", "charge_term_current", "constant_charge_current",
		"constant_charge_current_max", "constant_charge_voltage", "constant_charge_voltage_max", "precharge_current",
		"input_current_limit", "power_watt", "temp_celsius", "temp_alert_max_celsius", "temp_alert_min_celsius",
		"temp_ambient_celsius", "temp_ambient_max_celsius", "temp_ambient_min_celsius", "temp_max_celsius", "temp_min_celsius"} {
		add("power_supply."+n, r("node_power_supply_"+n, Gauge, series.Float, 1, n+" value of /sys/class/power_supply/<power_supply>.", []string{"power_supply"}))
	}
	info("power_supply.info", "node_power_supply_info", "info of /sys/class/power_supply/<power_supply>.", "power_supply",
		"capacity_level", "charge_type", "health", "manufacturer", "model_name", "serial_number", "status", "technology", "type", "usb_type", "scope")

	// Interrupts, as node_exporter's interrupts collector (off by default on both).
	add("interrupts", r("node_interrupts_total", Counter, series.Counter, 1, "Interrupt details.", []string{"cpu", "type", "info", "devices"}))

	// Processes and threads per state, as node_exporter's processes collector (--processes;
	// off by default on both).
	add("processes.pids", r("node_processes_pids", Gauge, series.Level, 1, "Number of PIDs", nil))
	add("processes.threads", r("node_processes_threads", Gauge, series.Level, 1, "Allocated threads in system", nil))
	add("processes.max_processes", r("node_processes_max_processes", Gauge, series.Level, 1, "Number of max PIDs limit", nil))
	add("processes.max_threads", r("node_processes_max_threads", Gauge, series.Level, 1, "Limit of threads in the system", nil))
	add("processes.state", r("node_processes_state", Gauge, series.Level, 1, "Number of processes in each state.", []string{"state"}))
	add("processes.threads_state", r("node_processes_threads_state", Gauge, series.Level, 1, "Number of threads in each state.", []string{"thread_state"}))

	// systemd's units over D-Bus, as node_exporter's systemd collector (--systemd; off by
	// default on both). A unit's type is empty but for services and mounts: left out.
	add("systemd.unit_state", r("node_systemd_unit_state", Gauge, series.Level, 1, "Systemd unit", []string{"name", "state", "type"}))
	add("systemd.units", r("node_systemd_units", Gauge, series.Level, 1, "Summary of systemd unit states", []string{"state"}))
	add("systemd.system_running", r("node_systemd_system_running", Gauge, series.Level, 1, "Whether the system is operational (see 'systemctl is-system-running')", nil))
	add("systemd.version", r("node_systemd_version", Gauge, series.Float, 1, "Detected systemd version", []string{"version"}))

	// The textfile collector's own series, as node_exporter's (internal/textfile).
	add("textfile.mtime_s", r("node_textfile_mtime_seconds", Gauge, series.Float, 1, "Unixtime mtime of textfiles successfully read.", []string{"file"}))
	add("textfile.scrape_error", r("node_textfile_scrape_error", Gauge, series.Level, 1, "1 if there was an error opening or reading a file, 0 otherwise", nil))

	// Filesystems, as node_exporter's filesystem collector.
	fsl := []string{"device", "mountpoint", "fstype"}
	for cantal, ne := range map[string]string{
		"size": "node_filesystem_size_bytes", "free": "node_filesystem_free_bytes", "avail": "node_filesystem_avail_bytes",
		"files": "node_filesystem_files", "files_free": "node_filesystem_files_free",
		"readonly": "node_filesystem_readonly", "device_error": "node_filesystem_device_error",
	} {
		add("fs."+cantal, r(ne, Gauge, series.Level, 1, "Filesystem "+cantal+" (statfs).", fsl))
	}
	add("system.idle_s", r("cantal_idle_seconds_total", Counter, series.Float, 1, "Idle time since boot, summed over CPUs (/proc/uptime).", nil))
	add("system.files.allocated", r("node_filefd_allocated", Gauge, series.Level, 1, "File descriptor statistics: allocated.", nil))
	add("system.files.max", r("node_filefd_maximum", Gauge, series.Level, 1, "File descriptor statistics: maximum.", nil))
	add("system.files.free", r("cantal_filefd_free", Gauge, series.Level, 1, "Allocated but unused file handles (/proc/sys/fs/file-nr).", nil))

	// /proc/net/dev, as node_exporter's netdev collector.
	for cantal, ne := range map[string]string{
		"rx.bytes": "receive_bytes", "rx.packets": "receive_packets", "rx.errors": "receive_errs",
		"rx.drop": "receive_drop", "rx.fifo": "receive_fifo", "rx.frame": "receive_frame",
		"rx.compressed": "receive_compressed", "rx.multicast": "receive_multicast",
		"tx.bytes": "transmit_bytes", "tx.packets": "transmit_packets", "tx.errors": "transmit_errs",
		"tx.drop": "transmit_drop", "tx.fifo": "transmit_fifo", "tx.collisions": "transmit_colls",
		"tx.carrier": "transmit_carrier", "tx.compressed": "transmit_compressed",
	} {
		ru := r("node_network_"+ne+"_total", Counter, series.Counter, 1, "Network device statistic "+ne+".", netLabels)
		ru.netdev = true
		add("net.interface."+cantal, ru)
	}

	// /proc/diskstats, as node_exporter's diskstats collector.
	disk := func(metric, name string, typ Type, kind series.Kind, scale float64, help string) {
		ru := r(name, typ, kind, scale, help, diskLabels)
		ru.disk = true
		add(metric, ru)
	}
	disk("disk.read.ops", "node_disk_reads_completed_total", Counter, series.Counter, 1, "The total number of reads completed successfully.")
	disk("disk.read.merges", "node_disk_reads_merged_total", Counter, series.Counter, 1, "The total number of reads merged.")
	disk("disk.read.bytes", "node_disk_read_bytes_total", Counter, series.Counter, 1, "The total number of bytes read successfully.")
	disk("disk.read.time_ms", "node_disk_read_time_seconds_total", Counter, series.Counter, ms, "The total number of seconds spent by all reads.")
	disk("disk.write.ops", "node_disk_writes_completed_total", Counter, series.Counter, 1, "The total number of writes completed successfully.")
	disk("disk.write.merges", "node_disk_writes_merged_total", Counter, series.Counter, 1, "The number of writes merged.")
	disk("disk.write.bytes", "node_disk_written_bytes_total", Counter, series.Counter, 1, "The total number of bytes written successfully.")
	disk("disk.write.time_ms", "node_disk_write_time_seconds_total", Counter, series.Counter, ms, "This is the total number of seconds spent by all writes.")
	disk("disk.in_progress", "node_disk_io_now", Gauge, series.Level, 1, "The number of I/Os currently in progress.")
	disk("disk.io_time_ms", "node_disk_io_time_seconds_total", Counter, series.Counter, ms, "Total seconds spent doing I/Os.")
	disk("disk.weighted_io_time_ms", "node_disk_io_time_weighted_seconds_total", Counter, series.Counter, ms, "The weighted # of seconds spent doing I/Os.")
	disk("disk.discard.ops", "node_disk_discards_completed_total", Counter, series.Counter, 1, "The total number of discards completed successfully.")
	disk("disk.discard.merges", "node_disk_discards_merged_total", Counter, series.Counter, 1, "The total number of discards merged.")
	disk("disk.discard.bytes", "node_disk_discarded_sectors_total", Counter, series.Counter, 1.0/512, "The total number of sectors discarded successfully.")
	disk("disk.discard.time_ms", "node_disk_discard_time_seconds_total", Counter, series.Counter, ms, "This is the total number of seconds spent by all discards.")
	disk("disk.flush.ops", "node_disk_flush_requests_total", Counter, series.Counter, 1, "The total number of flush requests completed successfully")
	disk("disk.flush.time_ms", "node_disk_flush_requests_time_seconds_total", Counter, series.Counter, ms, "This is the total number of seconds spent by all flush requests.")

	// TCP sockets per state as node_exporter's tcpstat collector (--tcpstat; off by default on
	// both); the agent's own counts below have no node_exporter equivalent.
	add("tcp.connection_states", r("node_tcp_connection_states", Gauge, series.Level, 1, "Number of connection states.", []string{"state"}))
	add("tcp.sockets", r("cantal_tcp_sockets", Gauge, series.Level, 1, "TCP sockets in each state.", []string{"state"}))
	add("tcp.tx_queue", r("cantal_tcp_tx_queue_bytes", Gauge, series.Level, 1, "Bytes in the send queues of all TCP sockets.", nil))
	add("tcp.rx_queue", r("cantal_tcp_rx_queue_bytes", Gauge, series.Level, 1, "Bytes in the receive queues of all TCP sockets, plus accept backlogs.", nil))
	add("tcp.listen.sockets", r("cantal_tcp_listen_sockets", Gauge, series.Level, 1, "Listening TCP sockets on each local port.", []string{"port"}))
	add("tcp.listen.queue", r("cantal_tcp_listen_queue_connections", Gauge, series.Level, 1, "Connections waiting to be accepted on each listening port.", []string{"port"}))
	add("tcp.listen.established", r("cantal_tcp_listen_established_sockets", Gauge, series.Level, 1, "Established inbound TCP sockets on each listening port.", []string{"port"}))
	add("tcp.uid.sockets", r("cantal_tcp_uid_sockets", Gauge, series.Level, 1, "TCP sockets owned by each uid, except time_wait.", []string{"uid"}))

	// Cgroups; a container's (labelled container_id) also under cAdvisor's names.
	cg := cgLabels
	cadv := func(metric, name string, typ Type, kind series.Kind, scale float64, help string) {
		m[metric].cadv = r(name, typ, kind, scale, help, nil)
	}
	add("cgroup.processes", r("cantal_cgroup_processes", Gauge, series.Level, 1, "Processes in the cgroup.", cg))
	add("cgroup.cpu.usage_ms", r("cantal_cgroup_cpu_usage_seconds_total", Counter, series.Counter, ms, "CPU time used by the cgroup.", cg))
	add("cgroup.cpu.user_ms", r("cantal_cgroup_cpu_seconds_total", Counter, series.Counter, ms, "CPU time used by the cgroup in each mode.", cg, "mode=user"))
	add("cgroup.cpu.system_ms", r("cantal_cgroup_cpu_seconds_total", Counter, series.Counter, ms, "CPU time used by the cgroup in each mode.", cg, "mode=system"))
	add("cgroup.memory.usage", r("cantal_cgroup_memory_usage_bytes", Gauge, series.Level, 1, "Memory used by the cgroup.", cg))
	add("cgroup.memory.anon", r("cantal_cgroup_memory_anon_bytes", Gauge, series.Level, 1, "Anonymous memory of the cgroup.", cg))
	add("cgroup.memory.file", r("cantal_cgroup_memory_file_bytes", Gauge, series.Level, 1, "Page cache of the cgroup.", cg))
	add("cgroup.memory.limit", r("cantal_cgroup_memory_limit_bytes", Gauge, series.Level, 1, "Memory limit of the cgroup.", cg))
	add("cgroup.cpu.periods", r("cantal_cgroup_cpu_cfs_periods_total", Counter, series.Counter, 1, "CFS periods the cgroup's CPU quota was enforced in.", cg))
	add("cgroup.cpu.throttled_periods", r("cantal_cgroup_cpu_cfs_throttled_periods_total", Counter, series.Counter, 1, "CFS periods the cgroup was throttled in.", cg))
	add("cgroup.cpu.throttled_ms", r("cantal_cgroup_cpu_cfs_throttled_seconds_total", Counter, series.Counter, ms, "Time the cgroup was throttled.", cg))
	add("cgroup.memory.oom", r("cantal_cgroup_memory_oom_events_total", Counter, series.Counter, 1, "Times the cgroup's memory reached its limit and the OOM killer was invoked.", cg))
	add("cgroup.memory.oom_kill", r("cantal_cgroup_memory_oom_kills_total", Counter, series.Counter, 1, "Processes of the cgroup the OOM killer killed.", cg))
	add("cgroup.memory.working_set", r("cantal_cgroup_memory_working_set_bytes", Gauge, series.Level, 1, "Memory of the cgroup less its inactive page cache.", cg))
	cadv("cgroup.processes", "container_processes", Gauge, series.Level, 1, "Number of processes running inside the container.")
	cadv("cgroup.cpu.usage_ms", "container_cpu_usage_seconds_total", Counter, series.Counter, ms, "Cumulative cpu time consumed in seconds.")
	cadv("cgroup.cpu.user_ms", "container_cpu_user_seconds_total", Counter, series.Counter, ms, "Cumulative user cpu time consumed in seconds.")
	cadv("cgroup.cpu.system_ms", "container_cpu_system_seconds_total", Counter, series.Counter, ms, "Cumulative system cpu time consumed in seconds.")
	cadv("cgroup.memory.usage", "container_memory_usage_bytes", Gauge, series.Level, 1, "Current memory usage in bytes, including all memory regardless of when it was accessed")
	cadv("cgroup.memory.anon", "container_memory_rss", Gauge, series.Level, 1, "Size of RSS in bytes.")
	cadv("cgroup.memory.file", "container_memory_cache", Gauge, series.Level, 1, "Number of bytes of page cache memory.")
	cadv("cgroup.cpu.periods", "container_cpu_cfs_periods_total", Counter, series.Counter, 1, "Number of elapsed enforcement period intervals.")
	cadv("cgroup.cpu.throttled_periods", "container_cpu_cfs_throttled_periods_total", Counter, series.Counter, 1, "Number of throttled period intervals.")
	cadv("cgroup.cpu.throttled_ms", "container_cpu_cfs_throttled_seconds_total", Counter, series.Counter, ms, "Total time duration the container has been throttled.")
	cadv("cgroup.memory.oom_kill", "container_oom_events_total", Counter, series.Counter, 1, "Count of out of memory events observed for the container")
	cadv("cgroup.memory.working_set", "container_memory_working_set_bytes", Gauge, series.Level, 1, "Current working set in bytes.")
	cadv("cgroup.memory.limit", "container_spec_memory_limit_bytes", Gauge, series.Level, 1, "Memory limit for the container.")
	// Per device and interface (internal/procscan cgroup_res.go): cAdvisor's device label is
	// the device's path, its interface label the interface's name.
	cgDev, cgIf := append(append([]string{}, cg...), "device"), append(append([]string{}, cg...), "interface")
	cadvL := func(metric, name string, typ Type, kind series.Kind, scale float64, help string, label string) {
		m[metric].cadv = r(name, typ, kind, scale, help, []string{label})
	}
	for _, e := range []struct{ metric, cantal, help, cadv, cadvHelp string }{
		{"cgroup.io.read_bytes", "cantal_cgroup_io_read_bytes_total", "Bytes the cgroup read from each block device.", "container_fs_reads_bytes_total", "Cumulative count of bytes read"},
		{"cgroup.io.write_bytes", "cantal_cgroup_io_written_bytes_total", "Bytes the cgroup wrote to each block device.", "container_fs_writes_bytes_total", "Cumulative count of bytes written"},
		{"cgroup.io.reads", "cantal_cgroup_io_reads_total", "Reads the cgroup issued to each block device.", "container_fs_reads_total", "Cumulative count of reads completed"},
		{"cgroup.io.writes", "cantal_cgroup_io_writes_total", "Writes the cgroup issued to each block device.", "container_fs_writes_total", "Cumulative count of writes completed"},
	} {
		add(e.metric, r(e.cantal, Counter, series.Counter, 1, e.help, cgDev))
		cadvL(e.metric, e.cadv, Counter, series.Counter, 1, e.cadvHelp, "device")
	}
	for _, e := range []struct{ metric, name, help string }{
		{"cgroup.net.rx.bytes", "receive_bytes_total", "Cumulative count of bytes received"},
		{"cgroup.net.rx.packets", "receive_packets_total", "Cumulative count of packets received"},
		{"cgroup.net.rx.errors", "receive_errors_total", "Cumulative count of errors encountered while receiving"},
		{"cgroup.net.rx.drop", "receive_packets_dropped_total", "Cumulative count of packets dropped while receiving"},
		{"cgroup.net.tx.bytes", "transmit_bytes_total", "Cumulative count of bytes transmitted"},
		{"cgroup.net.tx.packets", "transmit_packets_total", "Cumulative count of packets transmitted"},
		{"cgroup.net.tx.errors", "transmit_errors_total", "Cumulative count of errors encountered while transmitting"},
		{"cgroup.net.tx.drop", "transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting"},
	} {
		add(e.metric, r("cantal_cgroup_network_"+e.name, Counter, series.Counter, 1, e.help+" by each interface of the cgroup's network namespace.", cgIf))
		cadvL(e.metric, "container_network_"+e.name, Counter, series.Counter, 1, e.help, "interface")
	}
	add("cgroup.pids", r("cantal_cgroup_tasks", Gauge, series.Level, 1, "Tasks (threads) in the cgroup (pids.current).", cg))
	add("cgroup.pids.limit", r("cantal_cgroup_tasks_limit", Gauge, series.Level, 1, "Most tasks the cgroup may have (pids.max).", cg))
	cadv("cgroup.pids", "container_threads", Gauge, series.Level, 1, "Number of threads running inside the container")
	cadv("cgroup.pids.limit", "container_threads_max", Gauge, series.Level, 1, "Maximum number of threads allowed inside the container, infinity if value is zero")
	for _, res := range []struct{ name, what string }{{"cpu", "CPU"}, {"memory", "memory"}, {"io", "IO"}} {
		add("cgroup.pressure."+res.name+".some_ms", r("cantal_cgroup_pressure_"+res.name+"_waiting_seconds_total", Counter, series.Counter, ms,
			"Time some tasks of the cgroup waited for "+res.what+" (PSI some).", cg))
		add("cgroup.pressure."+res.name+".full_ms", r("cantal_cgroup_pressure_"+res.name+"_stalled_seconds_total", Counter, series.Counter, ms,
			"Time all non-idle tasks of the cgroup waited for "+res.what+" (PSI full).", cg))
		cadv("cgroup.pressure."+res.name+".some_ms", "container_pressure_"+res.name+"_waiting_seconds_total", Counter, series.Counter, ms,
			"Total time duration tasks in the container have waited due to "+res.what+" congestion.")
		cadv("cgroup.pressure."+res.name+".full_ms", "container_pressure_"+res.name+"_stalled_seconds_total", Counter, series.Counter, ms,
			"Total time duration no tasks in the container could make progress due to "+res.what+" congestion.")
	}

	// Processes: per pid here; grouped by the exporter (Series.Process).
	proc := func(metric, name string, typ Type, kind series.Kind, scale float64, help string, consts ...string) {
		ru := r(name, typ, kind, scale, help, procLabels, consts...)
		ru.process = true
		add(metric, ru)
	}
	proc("process.cpu.user_ms", "cantal_process_cpu_seconds_total", Counter, series.Counter, ms, "CPU time of the processes in each mode.", "mode=user")
	proc("process.cpu.system_ms", "cantal_process_cpu_seconds_total", Counter, series.Counter, ms, "CPU time of the processes in each mode.", "mode=system")
	proc("process.memory.rss", "cantal_process_memory_bytes", Gauge, series.Level, 1, "Memory of the processes by type.", "memtype=resident")
	proc("process.memory.vsize", "cantal_process_memory_bytes", Gauge, series.Level, 1, "Memory of the processes by type.", "memtype=virtual")
	proc("process.memory.swap", "cantal_process_memory_bytes", Gauge, series.Level, 1, "Memory of the processes by type.", "memtype=swapped")
	proc("process.threads", "cantal_process_num_threads", Gauge, series.Level, 1, "Threads of the processes.")
	proc("process.io.read_bytes", "cantal_process_read_bytes_total", Counter, series.Counter, 1, "Bytes the processes fetched from storage.")
	proc("process.io.write_bytes", "cantal_process_write_bytes_total", Counter, series.Counter, 1, "Bytes the processes sent to storage.")
	return m
}()

// TimeSeries is node_time_seconds, which has no Cantal series: an exporter writes it with the
// scan time of the series marked Series.Clock.
func TimeSeries() Series {
	return Series{Name: "node_time_seconds", Type: Gauge, Scale: 1, Machine: true,
		Help: "System time in seconds since epoch (1970)."}
}
