package sysscan

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParsePowerSupplyValue(t *testing.T) {
	if v, err := parsePowerSupplyValue([]byte("12134000\n"), 1e6); err != nil || v != 12.134 {
		t.Errorf("voltage: %v %v", v, err)
	}
	if v, err := parsePowerSupplyValue([]byte("-285\n"), 10); err != nil || v != -28.5 {
		t.Errorf("temp: %v %v", v, err)
	}
	for _, bad := range []string{"", "Unknown\n", "1.5"} {
		if _, err := parsePowerSupplyValue([]byte(bad), 1); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if n, s := psFileIndex("current_now"); n < 0 || s >= 0 || psNumbers[n].name != "current_ampere" {
		t.Errorf("current_now: %d %d", n, s)
	}
	if n, s := psFileIndex("status"); n >= 0 || s != psStatus {
		t.Errorf("status: %d %d", n, s)
	}
	if n, s := psFileIndex("uevent"); n >= 0 || s >= 0 {
		t.Errorf("uevent: %d %d", n, s)
	}
}

// TestPowerSupplyFixture: a mains adapter (AC) and a discharging battery (BAT0) give
// node_exporter's series in its units, and one info series per supply with a label per text
// file; the battery starting to charge changes its info series' labels at the next read; a
// supply removed is forgotten at the next listing.
func TestPowerSupplyFixture(t *testing.T) {
	sys := copyTree(t, "testdata/power_supply/sys")
	s := NewSystem(Options{Proc: "testdata/proc", Sys: sys, PageSize: 4096})
	defer s.Close()
	r := series.NewRecorder()
	scan := func() {
		t.Helper()
		clear(r.Values)
		clear(r.States)
		clear(r.Problems)
		if err := s.Collect(context.Background(), r); err != nil {
			t.Fatalf("Collect: %v", err)
		}
		if len(r.Problems) != 0 {
			t.Errorf("problems: %v", r.Problems)
		}
	}
	key := func(m, ps string) string { return `{"metric":"power_supply.` + m + `","power_supply":"` + ps + `"}` }
	f := math.Float64bits
	want := map[string]uint64{
		key("online", "AC"):     f(1),
		key("capacity", "BAT0"): f(87), key("cyclecount", "BAT0"): f(132), key("present", "BAT0"): f(1),
		key("energy_watthour", "BAT0"): f(43.1), key("energy_full", "BAT0"): f(49.56), key("energy_full_design", "BAT0"): f(57.02),
		key("power_watt", "BAT0"): f(9.71), key("voltage_volt", "BAT0"): f(12.134), key("voltage_min_design", "BAT0"): f(11.52),
		key("temp_celsius", "BAT0"): f(28.5),
	}
	check := func() {
		t.Helper()
		got := map[string]uint64{}
		for k, v := range r.Values {
			if strings.Contains(k, `"power_supply.`) && !strings.Contains(k, `"power_supply.info"`) {
				got[k] = v
			}
		}
		if len(got) != len(want) {
			t.Errorf("power_supply series %v, want %v", got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, math.Float64frombits(g), ok, math.Float64frombits(v))
			}
		}
	}
	infos := func() map[string]string {
		out := map[string]string{}
		refs := r.Refs()
		for k, st := range r.States {
			l := refs[k].Labels
			if l["metric"] == "power_supply.info" {
				out[l["power_supply"]] = l["type"] + "," + l["status"] + "," + l["serial_number"] + "," + l["technology"] + "," + st.Text
				if n := len(l); l["power_supply"] == "AC" && n != 3 {
					t.Errorf("AC info labels %v: only power_supply and type", l)
				}
			}
		}
		return out
	}
	scan()
	check()
	if got := infos(); got["AC"] != "Mains,,,," || got["BAT0"] != "Battery,Discharging,4711,Li-ion,Discharging" || len(got) != 2 {
		t.Errorf("info %v", got)
	}
	dir := filepath.Join(sys, "class/power_supply")
	os.WriteFile(filepath.Join(dir, "BAT0/status"), []byte("Charging\n"), 0o644)
	for range psEvery { // the next read
		scan()
	}
	check()
	if got := infos(); got["BAT0"] != "Battery,Charging,4711,Li-ion,Charging" {
		t.Errorf("info after charging %v", got)
	}
	os.RemoveAll(filepath.Join(dir, "AC"))
	for s.gen%rareEvery != 0 {
		scan()
	}
	scan()
	delete(want, key("online", "AC"))
	check()
	if _, ok := s.supplies["AC"]; ok || len(s.supplies) != 1 {
		t.Errorf("supplies kept: %v", s.supplies)
	}
}
