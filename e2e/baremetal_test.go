package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// bareMetalMdstat has md arrays in each state node_exporter's mdadm collector tells apart:
// clean (md0), degraded and recovering with a failed member (md1), resyncing (md2), degraded
// with a failed member and a spare (md3), inactive (md4), raid0 without "[n/m]" (md5) and
// checking (md6).
const bareMetalMdstat = `Personalities : [raid1] [raid6] [raid5] [raid4] [raid0]
md0 : active raid1 sdb1[1] sda1[0]
      1048512 blocks super 1.2 [2/2] [UU]

md1 : active raid5 sdc[3] sdb[1] sda[0](F)
      1953260544 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]
      [=>...................]  recovery =  8.5% (83034112/976630272) finish=80.1min speed=185716K/sec

md2 : active raid1 sde[1] sdd[0]
      976630272 blocks super 1.2 [2/2] [UU]
      [==>..................]  resync = 12.3% (120139776/976630272) finish=70.0min speed=203612K/sec

md3 : active raid6 sdh[3] sdg[2] sdf[1] sdi[4](S) sdj[0](F)
      2930274304 blocks super 1.2 level 6, 512k chunk, algorithm 2 [4/3] [_UUU]

md4 : inactive sdk[0](S)
      1000 blocks super 1.2

md5 : active raid0 sdl[1] sdm[0]
      2000000 blocks super 1.2 512k chunks

md6 : active raid1 sdn[1] sdo[0]
      976630272 blocks super 1.2 [2/2] [UU]
      [====>................]  check = 22.1% (215836416/976630272) finish=60.0min speed=211000K/sec

unused devices: <none>
`

const bareMetalSchedstat = `version 15
timestamp 15819019232
cpu0 498494191 0 3533438552 2553969831 3853684107 2465731542 2045936778163039 343796328169361 4767485306
domain0 00000000,00000003 212499247 210112015 1861015 1860405436 536440 369895 32599 210079416 25368550 24241256 384652 927363878 807233 6366 1647 805586 0 0 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu1 518377256 0 4155211005 2778589869 10466382 2867629 1904686152592476 364107263788241 5145567945
`

// bareMetalInterrupts is a 4-CPU server's /proc/interrupts: numbered interrupts with one and
// with several devices, named ones, and ERR and MIS (one column, left out by node_exporter).
const bareMetalInterrupts = `           CPU0       CPU1       CPU2       CPU3       
  0:         46          0          0          0   IO-APIC   2-edge      timer
 16:          0          0          0          0   IO-APIC  16-fasteoi   i801_smbus, ehci_hcd:usb1
124:     813245          0     123456          0  PCI-MSI 524288-edge      nvme0q0
NMI:         51         49         48         50   Non-maskable interrupts
LOC:   97912349   84551232   79933121   81231125   Local timer interrupts
ERR:          0
MIS:          0
`

// writeBareMetalTree writes a /proc and /sys of a server with md arrays, scheduler statistics,
// thermal zones, cooling devices, bonds, CPU frequencies and power supplies under dir and returns the two roots.
func writeBareMetalTree(t *testing.T, dir string) (proc, sys string) {
	t.Helper()
	proc, sys = filepath.Join(dir, "proc"), filepath.Join(dir, "sys")
	files := map[string]string{
		"proc/mdstat":     bareMetalMdstat,
		"proc/schedstat":  bareMetalSchedstat,
		"proc/interrupts": bareMetalInterrupts,
	}
	for i, z := range []struct{ typ, temp string }{{"x86_pkg_temp", "52500"}, {"acpitz", "-1500"}, {"iwlwifi_1", "38000"}} {
		d := fmt.Sprintf("sys/class/thermal/thermal_zone%d/", i)
		files[d+"type"], files[d+"temp"], files[d+"mode"], files[d+"policy"] = z.typ+"\n", z.temp+"\n", "enabled\n", "step_wise\n"
	}
	for i, c := range []struct{ typ, cur, max string }{{"Processor", "0", "3"}, {"intel_powerclamp", "1", "50"}, {"Fan", "2", "7"}} {
		d := fmt.Sprintf("sys/class/thermal/cooling_device%d/", i)
		files[d+"type"], files[d+"cur_state"], files[d+"max_state"] = c.typ+"\n", c.cur+"\n", c.max+"\n"
	}
	// bond0 has a slave down (NodeBondingDegraded), bond1 (the older slave_ layout) has both up.
	files["sys/class/net/bonding_masters"] = "bond0 bond1\n"
	files["sys/class/net/bond0/bonding/slaves"] = "eth0 eth1\n"
	files["sys/class/net/bond0/lower_eth0/bonding_slave/mii_status"] = "up\n"
	files["sys/class/net/bond0/lower_eth1/bonding_slave/mii_status"] = "down\n"
	files["sys/class/net/bond1/bonding/slaves"] = "eth2 eth3\n"
	files["sys/class/net/bond1/slave_eth2/bonding_slave/mii_status"] = "up\n"
	files["sys/class/net/bond1/slave_eth3/bonding_slave/mii_status"] = "up\n"
	// cpu0 and cpu1 with cpufreq (cpu1 without the root-only cpuinfo_cur_freq), cpu2 without.
	for i, f := range []map[string]string{
		{"cpuinfo_cur_freq": "2400000", "cpuinfo_min_freq": "800000", "cpuinfo_max_freq": "3600000",
			"scaling_cur_freq": "1800123", "scaling_min_freq": "1200000", "scaling_max_freq": "3000000"},
		{"cpuinfo_min_freq": "800000", "cpuinfo_max_freq": "3600000",
			"scaling_cur_freq": "3599999", "scaling_min_freq": "800000", "scaling_max_freq": "3600000"},
	} {
		d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpufreq/", i)
		f["cpuinfo_transition_latency"], f["scaling_governor"], f["scaling_driver"] = "0", "powersave", "intel_pstate"
		f["scaling_available_governors"], f["related_cpus"], f["scaling_setspeed"] = "performance powersave", fmt.Sprint(i), "<unsupported>"
		for k, v := range f {
			files[d+k] = v + "\n"
		}
	}
	files["sys/devices/system/cpu/cpu2/online"] = "1\n"
	// A chip with fans (one stopped, below its minimum, alarming), a voltage with limits and a
	// temperature with a critical alarm; and one of the older layout, its sensors in device/.
	for k, v := range map[string]string{"hwmon0/name": "nct6775", "hwmon0/fan1_input": "1200", "hwmon0/fan1_min": "300",
		"hwmon0/fan1_alarm": "0", "hwmon0/fan2_input": "0", "hwmon0/fan2_min": "300", "hwmon0/fan2_alarm": "1",
		"hwmon0/in0_input": "1040", "hwmon0/in0_min": "900", "hwmon0/in0_max": "1200", "hwmon0/in0_alarm": "0",
		"hwmon0/temp1_input": "45000", "hwmon0/temp1_crit": "95000", "hwmon0/temp1_crit_alarm": "1", "hwmon0/temp1_label": "SYSTIN",
		"hwmon1/device/temp1_input": "38000", "hwmon1/device/fan1_input": "900", "hwmon1/device/fan1_min": "500",
		"hwmon1/device/fan1_alarm": "0"} {
		files["sys/class/hwmon/"+k] = v + "\n"
	}
	// A mains adapter and a discharging battery.
	for k, v := range map[string]string{"AC/online": "1", "AC/type": "Mains", "AC/uevent": "POWER_SUPPLY_NAME=AC",
		"BAT0/capacity": "87", "BAT0/capacity_level": "Normal", "BAT0/cycle_count": "132", "BAT0/energy_now": "43100000",
		"BAT0/energy_full": "49560000", "BAT0/energy_full_design": "57020000", "BAT0/manufacturer": "SMP",
		"BAT0/model_name": "5B10W13930", "BAT0/power_now": "9710000", "BAT0/present": "1", "BAT0/serial_number": " 4711",
		"BAT0/status": "Discharging", "BAT0/technology": "Li-ion", "BAT0/type": "Battery", "BAT0/voltage_min_design": "11520000",
		"BAT0/voltage_now": "12134000", "BAT0/temp": "285", "BAT0/current_now": "-800123"} {
		files["sys/class/power_supply/"+k] = v + "\n"
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc, sys
}

// TestNodeExporterBareMetalFixtures: the agent with --proc/--sys pointed at a fixture tree of a
// server (md arrays degraded, recovering, resyncing, checking, inactive; schedstat; thermal
// zones and cooling devices; bonds with a slave down; cpufreq; power supplies on AC and battery; interrupts; hwmon chips with fans, alarms and the device/ layout) and node_exporter 1.5 with --path.procfs/--path.sysfs on the same
// tree: every node_md_*, node_schedstat_*, node_thermal_zone_*, node_cooling_device_*, node_bonding_*, cpufreq, node_power_supply_*, node_interrupts_total and node_hwmon_* family
// has the same type, series (names and labels) and values on both (issue 36).
func TestNodeExporterBareMetalFixtures(t *testing.T) {
	background(t)()
	proc, sys := writeBareMetalTree(t, t.TempDir())
	ne := startNodeExporterArgs(t, "--path.procfs="+proc, "--path.sysfs="+sys, "--collector.disable-defaults",
		"--collector.mdadm", "--collector.schedstat", "--collector.thermal_zone", "--collector.bonding", "--collector.cpufreq", "--collector.powersupplyclass", "--collector.interrupts", "--collector.hwmon")
	a := startAgent(t, "--proc", proc, "--sys", sys, "--metrics-no-timestamps", "--interrupts")
	want := []string{"node_md_state", "node_md_disks", "node_md_disks_required", "node_md_blocks", "node_md_blocks_synced",
		"node_schedstat_running_seconds_total", "node_schedstat_waiting_seconds_total", "node_schedstat_timeslices_total",
		"node_thermal_zone_temp", "node_cooling_device_cur_state", "node_cooling_device_max_state",
		"node_bonding_slaves", "node_bonding_active",
		"node_cpu_frequency_hertz", "node_cpu_frequency_min_hertz", "node_cpu_frequency_max_hertz",
		"node_cpu_scaling_frequency_hertz", "node_cpu_scaling_frequency_min_hertz", "node_cpu_scaling_frequency_max_hertz",
		"node_power_supply_online", "node_power_supply_capacity", "node_power_supply_cyclecount", "node_power_supply_energy_watthour",
		"node_power_supply_energy_full", "node_power_supply_energy_full_design", "node_power_supply_power_watt",
		"node_power_supply_present", "node_power_supply_voltage_volt", "node_power_supply_voltage_min_design",
		"node_power_supply_temp_celsius", "node_power_supply_current_ampere", "node_power_supply_info", "node_interrupts_total",
		"node_hwmon_fan_rpm", "node_hwmon_fan_min_rpm", "node_hwmon_fan_alarm", "node_hwmon_in_volts", "node_hwmon_in_min_volts",
		"node_hwmon_in_max_volts", "node_hwmon_in_alarm", "node_hwmon_temp_celsius", "node_hwmon_temp_crit_celsius",
		"node_hwmon_temp_crit_alarm_celsius", "node_hwmon_chip_names", "node_hwmon_sensor_label"}
	waitFor(t, 20*time.Second, func() error {
		fams, err := scrapeFamilies(a.URL + "/metrics")
		if err != nil {
			return err
		}
		// Thermal zones are read every 5th scan: wait for them.
		if fams["node_thermal_zone_temp"] == nil || fams["node_md_state"] == nil || fams["node_power_supply_info"] == nil {
			return fmt.Errorf("no node_thermal_zone_temp, node_md_state or node_power_supply_info yet")
		}
		return nil
	})
	nf, err := scrapeFamilies(ne)
	if err != nil {
		t.Fatal(err)
	}
	af, err := scrapeFamilies(a.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if nf[name] == nil {
			t.Errorf("node_exporter has no %s: the fixture does not exercise it", name)
		}
		if af[name] == nil {
			t.Errorf("the agent has no %s", name)
		}
	}
	shared := 0
	for name, n := range nf {
		if !strings.HasPrefix(name, "node_md_") && !strings.HasPrefix(name, "node_schedstat_") &&
			!strings.HasPrefix(name, "node_thermal_zone_") && !strings.HasPrefix(name, "node_cooling_device_") &&
			!strings.HasPrefix(name, "node_bonding_") && !strings.HasPrefix(name, "node_cpu_frequency_") &&
			!strings.HasPrefix(name, "node_cpu_scaling_frequency_") && !strings.HasPrefix(name, "node_power_supply_") &&
			name != "node_interrupts_total" && !strings.HasPrefix(name, "node_hwmon_") {
			continue
		}
		g := af[name]
		if g == nil {
			continue // reported above
		}
		shared++
		if n.GetType() != g.GetType() {
			t.Errorf("%s: type %v, node_exporter %v", name, g.GetType(), n.GetType())
		}
		nv, gv := values(n), values(g)
		for k, v := range nv {
			if w, ok := gv[k]; !ok {
				t.Errorf("%s{%s}: missing on the agent (node_exporter: %v)", name, k, v)
			} else if w != v {
				t.Errorf("%s{%s}: agent %v, node_exporter %v", name, k, w, v)
			}
		}
		var extra []string
		for k := range gv {
			if _, ok := nv[k]; !ok {
				extra = append(extra, k)
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Errorf("%s: series node_exporter does not have: %v", name, extra)
		}
	}
	if shared != len(want) {
		t.Errorf("%d shared families, want %d", shared, len(want))
	}
	// The degraded arrays' missing members, which node_exporter 1.5 does not count.
	if v := values(af["cantal_md_disks_down"]); v["device=md1"] != 1 || v["device=md3"] != 1 || v["device=md0"] != 0 {
		t.Errorf("cantal_md_disks_down: %v", v)
	}
}

// mixinDisk is node-mixin's default disk-device selector of its RAID alerts.
const mixinDisk = `device=~"(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"`

// nodeMixinBareMetalAlerts are node-mixin's alerts (alerts/alerts.libsonnet) whose inputs are
// the RAID, bonding and textfile families, with their thresholds and without their "for".
var nodeMixinBareMetalAlerts = map[string]string{
	"NodeRAIDDegraded": `node_md_disks_required{job="node",` + mixinDisk + `} - ignoring (state) (node_md_disks{state="active",job="node",` +
		mixinDisk + `}) > 0`,
	"NodeRAIDDiskFailure":              `node_md_disks{state="failed",job="node",` + mixinDisk + `} > 0`,
	"NodeTextFileCollectorScrapeError": `node_textfile_scrape_error{job="node"} == 1`,
	"NodeBondingDegraded":              `(node_bonding_slaves{job="node"} - node_bonding_active{job="node"}) != 0`,
}

// TestNodeMixinBareMetalAlertsSideBySide: one real Prometheus scrapes the agent and
// node_exporter 1.5, both reading the same fixture tree of a server (degraded arrays md1 and
// md3 with a failed member each, bond0 with a slave down) and the same textfile directory (one broken file); node-mixin's
// RAID, bonding and textfile alert expressions give the same answers for both instances: the same
// series with the same values, and the ones the fixture must give.
func TestNodeMixinBareMetalAlertsSideBySide(t *testing.T) {
	background(t)()
	proc, sys := writeBareMetalTree(t, t.TempDir())
	tf := t.TempDir()
	os.Chmod(filepath.Dir(tf), 0o755)
	os.Chmod(tf, 0o755)
	os.WriteFile(filepath.Join(tf, "ok.prom"), []byte("backup_ok 1\n"), 0o644)
	os.WriteFile(filepath.Join(tf, "broken.prom"), []byte("broken{a=\"\n"), 0o644)
	ne := startNodeExporterArgs(t, "--path.procfs="+proc, "--path.sysfs="+sys, "--collector.disable-defaults",
		"--collector.mdadm", "--collector.bonding", "--collector.textfile", "--collector.textfile.directory="+tf)
	a := startAgent(t, "--proc", proc, "--sys", sys, "--textfile-dir", tf)
	neTarget := strings.TrimSuffix(strings.TrimPrefix(ne, "http://"), "/metrics")
	agTarget := strings.TrimPrefix(a.URL, "http://")

	prom := need(t, "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n"+
		"scrape_configs:\n  - job_name: node\n    static_configs: [{targets: [%q, %q]}]\n", neTarget, agTarget)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startProc(t, nil, nil, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	api := "http://" + addr
	want := map[string][]string{
		"NodeRAIDDegraded":                 {"device=md1", "device=md3"},
		"NodeRAIDDiskFailure":              {"device=md1", "device=md3"},
		"NodeTextFileCollectorScrapeError": {""},
		"NodeBondingDegraded":              {"master=bond0"},
	}
	waitFor(t, 60*time.Second, func() error {
		for alert, q := range nodeMixinBareMetalAlerts {
			byInstance := map[string]map[string]float64{neTarget: {}, agTarget: {}}
			ans, err := promQuery(api, q)
			if err != nil {
				return err
			}
			for _, r := range ans.Data.Result {
				var ls []string
				for k, v := range r.Metric {
					if k != "instance" && k != "job" && k != "__name__" && k != "state" {
						ls = append(ls, k+"="+v)
					}
				}
				sort.Strings(ls)
				if m := byInstance[r.Metric["instance"]]; m != nil {
					m[strings.Join(ls, ",")] = num(r.Value[1])
				}
			}
			for inst, m := range byInstance {
				var got []string
				for k := range m {
					got = append(got, k)
				}
				sort.Strings(got)
				if strings.Join(got, ";") != strings.Join(want[alert], ";") {
					return fmt.Errorf("%s on %s: %v, want %v", alert, inst, got, want[alert])
				}
			}
			for k, v := range byInstance[neTarget] {
				if byInstance[agTarget][k] != v {
					return fmt.Errorf("%s{%s}: agent %v, node_exporter %v", alert, k, byInstance[agTarget][k], v)
				}
			}
		}
		return nil
	})
}

// TestNodeExporterInterruptsRealProc: on this machine's own /proc/interrupts, the agent with
// --interrupts and node_exporter 1.5 with --collector.interrupts expose the same
// node_interrupts_total series (labels; the counts move between the two scrapes, so values
// are compared on the fixture, TestNodeExporterBareMetalFixtures).
func TestNodeExporterInterruptsRealProc(t *testing.T) {
	background(t)()
	ne := startNodeExporterArgs(t, "--collector.disable-defaults", "--collector.interrupts")
	a := startAgent(t, "--interrupts")
	var diff string
	waitFor(t, 20*time.Second, func() error {
		af, err := scrapeFamilies(a.URL + "/metrics")
		if err != nil {
			return err
		}
		nf, err := scrapeFamilies(ne)
		if err != nil {
			return err
		}
		if nf["node_interrupts_total"] == nil || af["node_interrupts_total"] == nil {
			return fmt.Errorf("node_interrupts_total: node_exporter %v, agent %v", nf["node_interrupts_total"] != nil, af["node_interrupts_total"] != nil)
		}
		if g, w := af["node_interrupts_total"].GetType(), nf["node_interrupts_total"].GetType(); g != w {
			t.Fatalf("type %v, node_exporter %v", g, w)
		}
		av, nv := values(af["node_interrupts_total"]), values(nf["node_interrupts_total"])
		var missing, extra []string
		for k := range nv {
			if _, ok := av[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k := range av {
			if _, ok := nv[k]; !ok {
				extra = append(extra, k)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		diff = fmt.Sprintf("missing on the agent %v, not on node_exporter %v", missing, extra)
		if len(missing)+len(extra) > 0 {
			return fmt.Errorf("%s", diff)
		}
		if len(nv) == 0 {
			return fmt.Errorf("no series")
		}
		return nil
	})
}
