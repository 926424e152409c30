package sysscan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseCpufreqKHz(t *testing.T) {
	for in, want := range map[string]uint64{"2400000\n": 2400000000, "0": 0, " 800000 \n": 800000000} {
		if v, err := parseCpufreqKHz([]byte(in)); err != nil || v != want {
			t.Errorf("%q: %d, %v; want %d", in, v, err, want)
		}
	}
	for _, bad := range []string{"", "-1\n", "2.4GHz", "<unknown>\n", "99999999999999999999"} {
		if _, err := parseCpufreqKHz([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for name, want := range map[string]string{"cpu0": "0", "cpu17": "17", "cpu": "", "cpufreq": "", "cpuidle": "", "cpu1a": ""} {
		if n, ok := cpuDirNumber(name); n != want || ok != (want != "") {
			t.Errorf("%s: %q %v", name, n, ok)
		}
	}
}

// TestCpufreqFixture: cpu0 with all six frequency files, cpu1 without cpuinfo_cur_freq (root's
// only on real machines), cpu2 without cpufreq: node_exporter's series, in Hz; a CPU gone
// offline (its directory removed) loses its series at the next listing; an unparsable file
// is reported and the other files kept.
func TestCpufreqFixture(t *testing.T) {
	sys := copyTree(t, "testdata/cpufreq/sys")
	s := NewSystem(Options{Proc: "testdata/proc", Sys: sys, PageSize: 4096})
	defer s.Close()
	r := series.NewRecorder()
	scan := func() {
		t.Helper()
		clear(r.Values)
		clear(r.Problems)
		if err := s.Collect(context.Background(), r); err != nil {
			t.Fatalf("Collect: %v", err)
		}
	}
	key := func(m, cpu string) string { return `{"cpu":"` + cpu + `","metric":"cpufreq.` + m + `"}` }
	check := func(want map[string]uint64) {
		t.Helper()
		got := map[string]uint64{}
		for k, v := range r.Values {
			if strings.Contains(k, `"cpufreq.`) {
				got[k] = v
			}
		}
		if len(got) != len(want) {
			t.Errorf("cpufreq series %v, want %v", got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %d (present %v), want %d", k, g, ok, v)
			}
		}
	}
	all := map[string]uint64{
		key("cur_hz", "0"): 2400000000, key("min_hz", "0"): 800000000, key("max_hz", "0"): 3600000000,
		key("scaling_cur_hz", "0"): 1800123000, key("scaling_min_hz", "0"): 1200000000, key("scaling_max_hz", "0"): 3000000000,
		key("min_hz", "1"): 800000000, key("max_hz", "1"): 3600000000,
		key("scaling_cur_hz", "1"): 3599999000, key("scaling_min_hz", "1"): 800000000, key("scaling_max_hz", "1"): 3600000000,
	}
	for range cpufreqEvery { // read at the first scan, written again from memory at the others
		scan()
		if len(r.Problems) != 0 {
			t.Errorf("problems: %v", r.Problems)
		}
		check(all)
	}
	// cpu1's scaling_cur_freq becomes unparsable: reported, its other files kept.
	cpu := filepath.Join(sys, "devices/system/cpu")
	os.WriteFile(filepath.Join(cpu, "cpu1/cpufreq/scaling_cur_freq"), []byte("<unknown>\n"), 0o644)
	scan() // scan cpufreqEvery+1: read again
	if len(r.Problems) != 1 {
		t.Errorf("problems %v, want one", r.Problems)
	}
	delete(all, key("scaling_cur_hz", "1"))
	check(all)
	// cpu1 goes offline: gone at the next listing (every rareEvery scans).
	os.RemoveAll(filepath.Join(cpu, "cpu1"))
	for s.gen%rareEvery != 0 {
		scan()
	}
	scan()
	for k := range all {
		if strings.Contains(k, `"cpu":"1"`) {
			delete(all, k)
		}
	}
	check(all)
	if len(s.cpus) != 1 { // cpu0 (cpu2 has no cpufreq)
		t.Errorf("cpus kept: %v", s.cpus)
	}
}
