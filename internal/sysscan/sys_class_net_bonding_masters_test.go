package sysscan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseBondNames(t *testing.T) {
	got, err := parseBondNames([]byte("bond0 bond1\tbond-2\n"), nil)
	if err != nil || len(got) != 3 || string(got[0]) != "bond0" || string(got[2]) != "bond-2" {
		t.Errorf("names %q, %v", got, err)
	}
	if got, err := parseBondNames([]byte("\n"), nil); err != nil || len(got) != 0 {
		t.Errorf("empty: %q, %v", got, err)
	}
	for _, bad := range []string{"../etc", "..", ".", "a/b", "bond\x01", "averyveryverylongname"} {
		if _, err := parseBondNames([]byte("bond0 "+bad+"\n"), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for in, want := range map[string]bool{"up\n": true, " up ": true, "down\n": false, "upper": false, "": false} {
		if parseMIIStatus([]byte(in)) != want {
			t.Errorf("mii_status %q: want %v", in, want)
		}
	}
}

// TestBondingFixture: bonds with a slave down (bond0, lower_ layout), all up (bond1, the older
// slave_ layout) and without slaves (bond2) give node_exporter's counts; a bond gone from
// bonding_masters stops its series; a bond whose slave cannot be read is reported and the
// others are still counted; a name leading out of the class directory is refused.
func TestBondingFixture(t *testing.T) {
	sys := copyTree(t, "testdata/bonding/sys")
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
	key := func(m, bond string) string { return `{"master":"` + bond + `","metric":"bonding.` + m + `"}` }
	check := func(want map[string]uint64) {
		t.Helper()
		got := map[string]uint64{}
		for k, v := range r.Values {
			if strings.Contains(k, `"bonding.`) {
				got[k] = v
			}
		}
		if len(got) != len(want) {
			t.Errorf("bonding series %v, want %v", got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %d (present %v), want %d", k, g, ok, v)
			}
		}
	}
	scan()
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	check(map[string]uint64{
		key("slaves", "bond0"): 2, key("active", "bond0"): 1,
		key("slaves", "bond1"): 2, key("active", "bond1"): 2,
		key("slaves", "bond2"): 0, key("active", "bond2"): 0,
	})
	if ref := r.Refs()[key("slaves", "bond0")]; ref == nil || ref.Kind != series.Level {
		t.Errorf("bonding.slaves ref %v", ref)
	}

	// bond1's second slave goes down, bond2 is removed.
	net := filepath.Join(sys, "class/net")
	os.WriteFile(filepath.Join(net, "bond1/slave_eth3/bonding_slave/mii_status"), []byte("down\n"), 0o644)
	os.WriteFile(filepath.Join(net, "bonding_masters"), []byte("bond0 bond1\n"), 0o644)
	scan()
	check(map[string]uint64{
		key("slaves", "bond0"): 2, key("active", "bond0"): 1,
		key("slaves", "bond1"): 2, key("active", "bond1"): 1,
	})
	if _, ok := s.bonds["bond2"]; ok {
		t.Errorf("bond2 still kept")
	}

	// bond0's slave list names a slave without a directory: bond0 is reported, bond1 counted.
	os.WriteFile(filepath.Join(net, "bond0/bonding/slaves"), []byte("eth0 eth1 eth9\n"), 0o644)
	scan()
	if len(r.Problems) != 1 {
		t.Errorf("problems %v, want one for bond0", r.Problems)
	}
	check(map[string]uint64{key("slaves", "bond1"): 2, key("active", "bond1"): 1})

	// A name leading out of the directory is refused, and so is the whole file.
	os.WriteFile(filepath.Join(net, "bonding_masters"), []byte("bond1 ../../x\n"), 0o644)
	scan()
	if len(r.Problems) != 1 {
		t.Errorf("problems %v, want one for bonding_masters", r.Problems)
	}
	check(map[string]uint64{})

	// Without the bonding driver: no series, no problem.
	os.Remove(filepath.Join(net, "bonding_masters"))
	scan()
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	check(map[string]uint64{})
}
