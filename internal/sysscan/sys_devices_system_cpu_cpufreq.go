package sysscan

// /sys/devices/system/cpu/cpu<N>/cpufreq: CPU frequencies (System), as node_exporter's cpufreq
// collector reads them.

import (
	"os"
	"path/filepath"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// cpufreqEvery is how often (in scans) the frequencies are read: six files per CPU; the scans
// between write the last values again.
const cpufreqEvery = 5

// cpufreqFiles are the files of cpu<N>/cpufreq read, in kHz, and the metric each becomes, in Hz.
var cpufreqFiles = [...]struct{ file, metric string }{
	{"cpuinfo_cur_freq", "cpufreq.cur_hz"},
	{"cpuinfo_min_freq", "cpufreq.min_hz"},
	{"cpuinfo_max_freq", "cpufreq.max_hz"},
	{"scaling_cur_freq", "cpufreq.scaling_cur_hz"},
	{"scaling_min_freq", "cpufreq.scaling_min_hz"},
	{"scaling_max_freq", "cpufreq.scaling_max_hz"},
}

// cpufreqState is System's state of the cpufreq collector. The CPUs are listed every
// rareEvery scans (which allocates); their files are read every cpufreqEvery scans. Only
// System's scan goroutine uses it.
type cpufreqState struct {
	cpus      map[string]*cpufreqCPU // by directory name (cpu0)
	cfMissing bool                   // no devices/system/cpu: looked for again every rareEvery scans
	cfListed  uint64                 // the scan of the latest listing
	cfBuf     []byte
	cfDir     string // sysDir/devices/system/cpu
	cfFD      int    // cfDir, open while cfOpen (closed by System.Close)
	cfOpen    bool
	cfPath    []byte
}

type cpufreqCPU struct {
	label         string // "0" for cpu0, node_exporter's cpu label
	refs          [len(cpufreqFiles)]*series.Ref
	vals          [len(cpufreqFiles)]uint64
	have          [len(cpufreqFiles)]bool
	scanmark.Mark // the latest listing that found it
}

// cpuDirNumber returns the N of a "cpu<N>" directory name; ok is false for other names
// (cpufreq, cpuidle, cpu, cpu1a).
func cpuDirNumber(name string) (string, bool) {
	if len(name) <= 3 || name[:3] != "cpu" {
		return "", false
	}
	if _, err := kfile.ParseUint([]byte(name[3:])); err != nil {
		return "", false
	}
	return name[3:], true
}

// parseCpufreqKHz parses a cpufreq frequency file ("2400000\n", kHz) into Hz.
func parseCpufreqKHz(b []byte) (uint64, error) {
	v, err := kfile.ParseIntValue(b)
	if err != nil {
		return 0, kfile.ParseError("cpufreq", b, err)
	}
	if v < 0 || v > 1<<53/1000 {
		return 0, kfile.ParseError("cpufreq", b, kfile.ErrSyntax)
	}
	return uint64(v) * 1000, nil
}

// collectCpufreq lists the CPUs every rareEvery scans, reads their frequencies every
// cpufreqEvery scans and writes the last values at every scan. A file that does not exist (no
// cpufreq driver, or cpuinfo_cur_freq, which only root may read) gives no series, as on
// node_exporter; one that cannot be parsed is reported.
func (s *System) collectCpufreq(sysDir string, sink series.Sink, rare bool) {
	st := &s.cpufreqState
	if st.cpus == nil {
		st.cpus = map[string]*cpufreqCPU{}
	}
	if st.cfDir == "" {
		st.cfDir = filepath.Join(sysDir, "devices/system/cpu")
	}
	dir := st.cfDir
	if rare || st.cfListed == 0 && !st.cfMissing {
		st.cfListed = s.gen
		ents, err := os.ReadDir(dir)
		st.cfMissing = err != nil && isAbsent(err)
		if err != nil {
			st.closeCpufreq() // a new directory, if it comes back
		}
		if err != nil && !st.cfMissing {
			sink.Problem(dir, err.Error())
		}
		for _, e := range ents {
			n, ok := cpuDirNumber(e.Name())
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "cpufreq")); err != nil {
				continue // no cpufreq driver (virtual machines): not read at all, as node_exporter
			}
			c := st.cpus[e.Name()]
			if c == nil {
				c = &cpufreqCPU{label: n}
				st.cpus[e.Name()] = c
			}
			c.See(s.gen)
		}
		scanmark.Sweep(st.cpus, s.gen, nil)
	}
	if len(st.cpus) > 0 && (s.gen-1)%cpufreqEvery == 0 {
		st.read(dir, sink)
	}
	for _, c := range st.cpus {
		for i, r := range c.refs {
			if c.have[i] {
				sink.Put(r, c.vals[i])
			}
		}
	}
}

func (st *cpufreqState) read(dir string, sink series.Sink) {
	if !st.cfOpen { // kept open: opening by name allocates
		fd, err := kfile.OpenDir(dir)
		if err != nil {
			if !isAbsent(err) {
				sink.Problem(dir, err.Error())
			}
			clear(st.cpus)
			return
		}
		st.cfFD, st.cfOpen = fd, true
	}
	fd := st.cfFD
	for name, c := range st.cpus {
		for i, f := range cpufreqFiles {
			c.have[i] = false
			st.cfPath = append(append(append(append(st.cfPath[:0], name...), "/cpufreq/"...), f.file...), 0)
			b, err := kfile.ReadFileAt(fd, st.cfPath, &st.cfBuf, 64)
			if err != nil {
				continue // absent, or root's only (cpuinfo_cur_freq): no series, as on node_exporter
			}
			v, err := parseCpufreqKHz(b)
			if err != nil {
				sink.Problem(filepath.Join(dir, name, "cpufreq", f.file), err.Error())
				continue
			}
			if c.refs[i] == nil {
				c.refs[i] = sink.Series(series.Labels{"metric": f.metric, "cpu": c.label}, series.Level)
			}
			c.vals[i], c.have[i] = v, true
		}
	}
}

func (st *cpufreqState) closeCpufreq() {
	if st.cfOpen {
		unix.Close(st.cfFD)
		st.cfOpen = false
	}
}
