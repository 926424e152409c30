package sysscan

// /sys/class/power_supply: mains adapters, batteries and UPSes (System), as node_exporter's
// powersupplyclass collector reads them.

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// psEvery is how often (in scans) the supplies' values are read; they are listed, with the
// attribute files each has, every rareEvery scans.
const psEvery = thermalEvery

// psNumbers are the numeric attribute files read: the file, node_exporter's name after
// node_power_supply_ and the divisor to its unit (µA, µV, µWh, µAh, µW to A, V, Wh, Ah, W;
// tenths of °C to °C). The metric is "power_supply."+name.
var psNumbers = [...]struct {
	file, name string
	div        float64 // divided by, as node_exporter does (not multiplied by 1e-6: bit-equal values)
}{
	{"authentic", "authentic", 1}, {"calibrate", "calibrate", 1}, {"capacity", "capacity", 1},
	{"capacity_alert_max", "capacity_alert_max", 1}, {"capacity_alert_min", "capacity_alert_min", 1},
	{"cycle_count", "cyclecount", 1}, {"online", "online", 1}, {"present", "present", 1},
	{"time_to_empty_now", "time_to_empty_seconds", 1}, {"time_to_full_now", "time_to_full_seconds", 1},
	{"current_boot", "current_boot", 1e6}, {"current_max", "current_max", 1e6}, {"current_now", "current_ampere", 1e6},
	{"energy_empty", "energy_empty", 1e6}, {"energy_empty_design", "energy_empty_design", 1e6},
	{"energy_full", "energy_full", 1e6}, {"energy_full_design", "energy_full_design", 1e6},
	{"energy_now", "energy_watthour", 1e6},
	{"voltage_boot", "voltage_boot", 1e6}, {"voltage_max", "voltage_max", 1e6},
	{"voltage_max_design", "voltage_max_design", 1e6}, {"voltage_min", "voltage_min", 1e6},
	{"voltage_min_design", "voltage_min_design", 1e6}, {"voltage_now", "voltage_volt", 1e6},
	{"voltage_ocv", "voltage_ocv", 1e6},
	{"charge_control_limit", "charge_control_limit", 1e6}, {"charge_control_limit_max", "charge_control_limit_max", 1e6},
	{"charge_counter", "charge_counter", 1e6}, {"charge_empty", "charge_empty", 1e6},
	{"charge_empty_design", "charge_empty_design", 1e6}, {"charge_full", "charge_full", 1e6},
	{"charge_full_design", "charge_full_design", 1e6}, {"charge_now", "charge_ampere", 1e6},
	{"charge_term_current", "charge_term_current", 1e6},
	{"constant_charge_current", "constant_charge_current", 1e6}, {"constant_charge_current_max", "constant_charge_current_max", 1e6},
	{"constant_charge_voltage", "constant_charge_voltage", 1e6}, {"constant_charge_voltage_max", "constant_charge_voltage_max", 1e6},
	{"precharge_current", "precharge_current", 1e6}, {"input_current_limit", "input_current_limit", 1e6},
	{"power_now", "power_watt", 1e6},
	{"temp", "temp_celsius", 10}, {"temp_alert_max", "temp_alert_max_celsius", 10}, {"temp_alert_min", "temp_alert_min_celsius", 10},
	{"temp_ambient", "temp_ambient_celsius", 10}, {"temp_ambient_max", "temp_ambient_max_celsius", 10},
	{"temp_ambient_min", "temp_ambient_min_celsius", 10}, {"temp_max", "temp_max_celsius", 10}, {"temp_min", "temp_min_celsius", 10},
}

// psStrings are the text attribute files that become labels of power_supply.info
// (node_power_supply_info), a label per file present and not empty.
var psStrings = [...]string{"capacity_level", "charge_type", "health", "manufacturer", "model_name",
	"serial_number", "status", "technology", "type", "usb_type", "scope"}

// psStatus is status's index in psStrings: the info series' text ("Charging", "Discharging").
const psStatus = 6

// psFileIndex finds a file of a supply's directory in psNumbers (n >= 0) or psStrings (s >= 0).
func psFileIndex(name string) (n, s int) {
	for i, a := range psNumbers {
		if a.file == name {
			return i, -1
		}
	}
	for i, a := range psStrings {
		if a == name {
			return -1, i
		}
	}
	return -1, -1
}

// parsePowerSupplyValue parses a numeric attribute file ("4200000\n") divided by div.
func parsePowerSupplyValue(b []byte, div float64) (float64, error) {
	v, err := kfile.ParseIntValue(b)
	if err != nil {
		return 0, kfile.ParseError("power_supply", b, err)
	}
	return float64(v) / div, nil
}

// powerSupplyState is System's state of the power supply collector. Only System's scan
// goroutine uses it.
type powerSupplyState struct {
	supplies  map[string]*powerSupply // by name (AC, BAT0)
	psMissing bool                    // no class/power_supply: looked for again every rareEvery scans
	psListed  bool
	psDir     string // sysDir/class/power_supply
	psFD      int    // psDir, open while psOpen (closed by System.Close)
	psOpen    bool
	psBuf     []byte
	psPath    []byte
}

type powerSupply struct {
	name    string
	nums    []int // indexes in psNumbers of the files it has
	strs    []int // indexes in psStrings of the files it has
	refs    [len(psNumbers)]*series.Ref
	vals    [len(psNumbers)]uint64 // float64 bits
	have    [len(psNumbers)]bool
	text    [len(psStrings)]string
	info    stateSeries
	changed bool // text changed since info was set
	scanmark.Mark
}

// collectPowerSupply lists the supplies every rareEvery scans, reads their values every
// psEvery scans and writes the last values at every scan. A file that cannot be read (a
// battery's driver refuses some while it is absent) gives no series that read; one that
// cannot be parsed is reported.
func (s *System) collectPowerSupply(sysDir string, sink series.Sink, rare bool) {
	st := &s.powerSupplyState
	if st.supplies == nil {
		st.supplies = map[string]*powerSupply{}
	}
	if st.psDir == "" {
		st.psDir = filepath.Join(sysDir, "class/power_supply")
	}
	if rare || !st.psListed && !st.psMissing {
		st.list(sink, s.gen)
	}
	if len(st.supplies) > 0 && (s.gen-1)%psEvery == 0 {
		st.read(sink)
	}
	for _, p := range st.supplies {
		for _, i := range p.nums {
			if p.have[i] {
				sink.Put(p.refs[i], p.vals[i])
			}
		}
		p.info.put(sink)
	}
}

func (st *powerSupplyState) list(sink series.Sink, gen uint64) {
	st.psListed = true
	ents, err := os.ReadDir(st.psDir)
	if err != nil {
		st.psMissing = isAbsent(err)
		if !st.psMissing {
			sink.Problem(st.psDir, err.Error())
		}
		clear(st.supplies)
		st.closePowerSupply()
		return
	}
	st.psMissing = false
	for _, e := range ents {
		name := e.Name()
		files, err := os.ReadDir(filepath.Join(st.psDir, name)) // follows the class's symlink
		if err != nil {
			continue // not a directory, or gone
		}
		p := st.supplies[name]
		if p == nil {
			p = &powerSupply{name: kfile.ValidString([]byte(name))}
			st.supplies[name] = p
		}
		p.nums, p.strs = p.nums[:0], p.strs[:0]
		for _, f := range files {
			if !f.Type().IsRegular() {
				continue
			}
			switch n, s := psFileIndex(f.Name()); {
			case n >= 0:
				p.nums = append(p.nums, n)
			case s >= 0:
				p.strs = append(p.strs, s)
			}
		}
		p.See(gen)
	}
	scanmark.Sweep(st.supplies, gen, nil)
}

func (st *powerSupplyState) read(sink series.Sink) {
	if !st.psOpen { // kept open: opening by name allocates
		fd, err := kfile.OpenDir(st.psDir)
		if err != nil {
			if !isAbsent(err) {
				sink.Problem(st.psDir, err.Error())
			}
			clear(st.supplies)
			return
		}
		st.psFD, st.psOpen = fd, true
	}
	for _, p := range st.supplies {
		for _, i := range p.nums {
			p.have[i] = false
			b, err := st.readAttr(p.name, psNumbers[i].file)
			if err != nil {
				continue
			}
			v, err := parsePowerSupplyValue(b, psNumbers[i].div)
			if err != nil {
				sink.Problem(filepath.Join(st.psDir, p.name, psNumbers[i].file), err.Error())
				continue
			}
			if p.refs[i] == nil {
				p.refs[i] = sink.Series(series.Labels{"metric": "power_supply." + psNumbers[i].name, "power_supply": p.name}, series.Float)
			}
			p.vals[i], p.have[i] = math.Float64bits(v), true
		}
		var seen [len(psStrings)]bool
		for _, i := range p.strs {
			b, err := st.readAttr(p.name, psStrings[i])
			if err != nil {
				continue
			}
			b = bytes.TrimSpace(b)
			seen[i] = len(b) > 0
			if string(b) != p.text[i] {
				p.text[i], p.changed = kfile.ValidString(b), true
			}
		}
		for i := range seen {
			if !seen[i] && p.text[i] != "" {
				p.text[i], p.changed = "", true
			}
		}
		if p.changed || p.info.ref == nil {
			l := series.Labels{"metric": "power_supply.info", "power_supply": p.name}
			for i, t := range p.text {
				if t != "" {
					l[psStrings[i]] = t
				}
			}
			p.info.set(sink, l, p.text[psStatus], time.Now().UnixMilli())
			p.changed = false
		}
	}
}

// readAttr reads supply/attr of the class directory into psBuf.
func (st *powerSupplyState) readAttr(supply, attr string) ([]byte, error) {
	st.psPath = append(append(append(append(st.psPath[:0], supply...), '/'), attr...), 0)
	return kfile.ReadFileAt(st.psFD, st.psPath, &st.psBuf, 4096)
}

func (st *powerSupplyState) closePowerSupply() {
	if st.psOpen {
		unix.Close(st.psFD)
		st.psOpen = false
	}
}
