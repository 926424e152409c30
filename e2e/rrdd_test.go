package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRRDDPlugin: a plugin process writing XAPI rrdd v2 files is served through the API with
// the datasource kinds and labels; a corrupt plugin file beside it shows in status and stops
// nothing.
func TestRRDDPlugin(t *testing.T) {
	serial(t)
	dir := t.TempDir()
	a := startAgent(t, "--rrdd-dir", dir)
	startProc(t, nil, nil, filepath.Join(bin, "rrdd-plugin"), "-dir", dir, "-name", "example", "-interval", "300ms")
	if err := os.WriteFile(filepath.Join(dir, "broken"), []byte("DATASOURCES garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{plugin="example"}`)
		if err != nil {
			return err
		}
		load := find(ss, "loadavg_1m")
		if load == nil || load.Kind != "float" || load.Labels["owner"] != "host" {
			return fmt.Errorf("loadavg_1m = %+v; want a float owned by host (all: %v)", load, ss)
		}
		mem := find(ss, "memory_available_kib")
		if mem == nil || mem.Kind != "level" || mem.Labels["units"] != "KiB" || num(mem.Value) <= 0 {
			return fmt.Errorf("memory_available_kib = %+v; want a positive level in KiB", mem)
		}
		upd := find(ss, "plugin_updates")
		if upd == nil || upd.Kind != "counter" || upd.Rate == nil || *upd.Rate <= 0 {
			return fmt.Errorf("plugin_updates = %+v; want a counter with a positive rate", upd)
		}
		var st struct {
			Problems []struct{ Source, Reason string }
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		for _, p := range st.Problems {
			if strings.HasSuffix(p.Source, "broken") {
				return nil
			}
		}
		return fmt.Errorf("the broken plugin file is not in status problems: %+v", st.Problems)
	})
}
