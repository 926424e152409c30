package sysscan

// /sys/class/hwmon: hardware sensors (System).

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// hwmon reads /sys/class/hwmon for System. The chips and their sensor files are listed every
// rareEvery scans (which allocates); their values are read every thermalEvery scans into
// Refs found then, and written again at the scans between. Only System's scan goroutine uses
// it.
type hwmon struct {
	sensors []hwSensor
	chips   map[string]*hwState // by chip label
	labels  map[string]*hwState // by chip label and sensor
	buf     []byte
	listed  bool
	lists   uint64 // listings so far, the generation of the marks in chips and labels
}

// hwState is the state series of a chip's name or of a sensor's label, marked by the latest
// listing that found it.
type hwState struct {
	scanmark.Mark
	stateSeries
}

// hwSensor is one value file of a chip.
type hwSensor struct {
	path  []byte // absolute, NUL-terminated
	ref   *series.Ref
	scale float64 // the value is multiplied by it (float kinds)
	val   uint64
	have  bool
}

// hwInputs says which sensor files become series: the type prefix, the property suffix, the
// metric, its kind and the scale to the metric's unit.
var hwInputs = [...]struct {
	typ, prop, metric string
	kind              series.Kind
	scale             float64
}{
	{"temp", "input", "hwmon.temp_c", series.Float, 1e-3},
	{"temp", "crit", "hwmon.temp_crit_c", series.Float, 1e-3},
	{"temp", "max", "hwmon.temp_max_c", series.Float, 1e-3},
	{"fan", "input", "hwmon.fan_rpm", series.Level, 1},
	{"in", "input", "hwmon.in_v", series.Float, 1e-3},
	{"in", "min", "hwmon.in_min_v", series.Float, 1e-3},
	{"in", "max", "hwmon.in_max_v", series.Float, 1e-3},
	{"fan", "min", "hwmon.fan_min_rpm", series.Level, 1},
	// Alarms: 0 or 1, without a unit, as node_exporter's; but temp<N>_crit_alarm is
	// node_exporter's node_hwmon_temp_crit_alarm_celsius, scaled as a temperature (1 → 0.001).
	{"fan", "alarm", "hwmon.fan_alarm", series.Level, 1},
	{"in", "alarm", "hwmon.in_alarm", series.Level, 1},
	{"temp", "alarm", "hwmon.temp_alarm", series.Level, 1},
	{"temp", "crit_alarm", "hwmon.temp_crit_alarm", series.Float, 1e-3},
}

func newHwmon() hwmon {
	return hwmon{chips: map[string]*hwState{}, labels: map[string]*hwState{}, buf: make([]byte, 0, 256)}
}

// cleanHwmonName lower-cases s and replaces what is outside [a-z0-9:_] by '_', trimming '_'
// at both ends, as node_exporter's hwmon collector names chips.
func cleanHwmonName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ':' || c == '_') {
			b[i] = '_'
		}
	}
	return strings.Trim(string(b), "_")
}

// hwmonChipName names the chip of directory dir (a /sys/class/hwmon/hwmon<N> entry) as
// node_exporter does: its device's parent directory and name, else its name file, else the
// hwmon<N> directory's own name.
func hwmonChipName(dir string) string {
	if dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil {
		prefix, name := filepath.Split(dev)
		_, typ := filepath.Split(strings.TrimRight(prefix, "/"))
		n, t := cleanHwmonName(name), cleanHwmonName(typ)
		if n != "" && t != "" {
			return t + "_" + n
		}
		if n != "" {
			return n
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "name")); err == nil {
		if n := cleanHwmonName(strings.TrimSpace(string(b))); n != "" {
			return n
		}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	return cleanHwmonName(filepath.Base(real))
}

// splitSensorFile splits a sensor file name "temp1_input" into its type "temp", sensor
// "temp1" and property "input"; ok is false for other names (name, uevent, ...).
func splitSensorFile(f string) (typ, sensor, prop string, ok bool) {
	i := strings.IndexByte(f, '_')
	if i <= 0 || i == len(f)-1 {
		return "", "", "", false
	}
	sensor, prop = f[:i], f[i+1:]
	j := len(sensor)
	for j > 0 && sensor[j-1] >= '0' && sensor[j-1] <= '9' {
		j--
	}
	if j == 0 || j == len(sensor) {
		return "", "", "", false
	}
	return sensor[:j], sensor, prop, true
}

// list finds the chips and their sensor files, registering their series; it keeps the last
// values of sensors that stay.
func (h *hwmon) list(sysDir string, sink series.Sink) {
	root := filepath.Join(sysDir, "class/hwmon")
	ents, err := os.ReadDir(root)
	if err != nil {
		if !os.IsNotExist(err) {
			sink.Problem(root, err.Error())
		}
		h.sensors = h.sensors[:0]
		clear(h.chips)
		clear(h.labels)
		return
	}
	old := map[string]hwSensor{}
	for _, s := range h.sensors {
		old[string(s.path)] = s
	}
	h.sensors = h.sensors[:0]
	h.lists++
	since := time.Now().UnixMilli()
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "hwmon") {
			continue
		}
		hwdir := filepath.Join(root, e.Name())
		chip := hwmonChipName(hwdir)
		if _, err := os.Stat(hwdir); err != nil {
			continue // vanished
		}
		// The sensor files are in hwmon<N>, or (older drivers) in hwmon<N>/device, or both:
		// node_exporter reads both.
		seen := map[string]bool{}
		h.listDir(hwdir, true, chip, old, seen, since, sink)
		h.listDir(filepath.Join(hwdir, "device"), false, chip, old, seen, since, sink)
	}
	scanmark.Sweep(h.chips, h.lists, nil)
	scanmark.Sweep(h.labels, h.lists, nil)
	h.listed = true
}

// listDir finds the sensor files of chip in dir: hwmon<N> (top, whose name file names the
// chip) or hwmon<N>/device, where a file of the same name as one in hwmon<N> is left out
// (seen).
func (h *hwmon) listDir(dir string, top bool, chip string, old map[string]hwSensor, seen map[string]bool, since int64, sink series.Sink) {
	{
		files, err := os.ReadDir(dir)
		if err != nil {
			return // vanished, or no device directory
		}
		if b, err := os.ReadFile(filepath.Join(dir, "name")); top && err == nil {
			name := kfile.ValidString([]byte(strings.TrimSpace(string(b))))
			st := h.chips[chip]
			if st == nil {
				st = &hwState{}
				h.chips[chip] = st
			}
			st.set(sink, series.Labels{"metric": "hwmon.chip", "chip": chip, "chip_name": name}, name, since)
			st.See(h.lists)
		}
		names := make([]string, 0, len(files))
		for _, f := range files {
			names = append(names, f.Name())
		}
		sort.Strings(names)
		for _, f := range names {
			typ, sensor, prop, ok := splitSensorFile(f)
			if !ok || seen[f] {
				continue
			}
			seen[f] = true
			if prop == "label" {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					continue
				}
				label := kfile.ValidString([]byte(strings.TrimSpace(string(b))))
				key := chip + "\x00" + sensor
				st := h.labels[key]
				if st == nil {
					st = &hwState{}
					h.labels[key] = st
				}
				st.set(sink, series.Labels{"metric": "hwmon.sensor", "chip": chip, "sensor": sensor, "label": label}, label, since)
				st.See(h.lists)
				continue
			}
			for _, in := range hwInputs {
				if in.typ != typ || in.prop != prop {
					continue
				}
				path := append([]byte(filepath.Join(dir, f)), 0)
				s, kept := old[string(path)]
				if !kept {
					s = hwSensor{path: path, scale: in.scale,
						ref: sink.Series(series.Labels{"metric": in.metric, "chip": chip, "sensor": sensor}, in.kind)}
				}
				h.sensors = append(h.sensors, s)
			}
		}
	}
}

// collect lists the chips on rare scans, reads the values every thermalEvery scans and writes
// the last values and the states at every scan.
func (h *hwmon) collect(sysDir string, sink series.Sink, gen uint64, rare bool) {
	if rare || !h.listed {
		h.list(sysDir, sink)
	}
	if (gen-1)%thermalEvery == 0 || rare {
		for i := range h.sensors {
			s := &h.sensors[i]
			s.have = false
			b, err := kfile.ReadFileAt(unix.AT_FDCWD, s.path, &h.buf, 4096)
			if err != nil {
				continue // a sensor the driver cannot read now
			}
			v, err := kfile.ParseIntValue(b)
			if err != nil {
				continue
			}
			if s.ref.Kind == series.Float {
				s.val = math.Float64bits(float64(v) * s.scale)
			} else {
				s.val = uint64(v)
			}
			s.have = true
		}
	}
	for i := range h.sensors {
		if s := &h.sensors[i]; s.have {
			sink.Put(s.ref, s.val)
		}
	}
	for _, st := range h.chips {
		st.put(sink)
	}
	for _, st := range h.labels {
		st.put(sink)
	}
}
