package alerts

import (
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// benchRegistry is a registry of n series like a busy node's: per-process series (8 per
// process), the machine's CPU, memory and filesystem series, and an application's.
func benchRegistry(b *testing.B, n int) (*registry.Registry, *history.Store, func()) {
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	var refs []*series.Ref
	for i := 0; len(refs) < n; i++ {
		for _, m := range []string{"process.cpu.user_ms", "process.cpu.system_ms", "process.memory.rss", "process.memory.vsize", "process.memory.swap", "process.io.read_bytes", "process.io.write_bytes", "process.threads"} {
			refs = append(refs, reg.Series(series.Labels{"metric": m, "pid": fmt.Sprint(1000 + i), "process": "worker"}, series.Level))
		}
	}
	for _, m := range []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"} {
		refs = append(refs, reg.Series(series.Labels{"metric": "cpu." + m + "_ms"}, series.Counter))
	}
	refs = append(refs, reg.Series(series.Labels{"metric": "memory.MemTotal"}, series.Level), reg.Series(series.Labels{"metric": "memory.MemAvailable"}, series.Level))
	for i := range 10 {
		for _, m := range []string{"fs.avail", "fs.size"} {
			refs = append(refs, reg.Series(series.Labels{"metric": m, "device": fmt.Sprintf("/dev/vd%c", 'a'+i), "mountpoint": fmt.Sprintf("/m%d", i), "fstype": "ext4"}, series.Level))
		}
	}
	for i := range 100 {
		refs = append(refs, reg.Series(series.Labels{"metric": "queue.len", "queue": fmt.Sprint(i), "pid": "1"}, series.Float))
	}
	ts := int64(1_700_000_000_000)
	var k uint64
	scan := func() {
		ts += 2000
		k++
		reg.Begin(ts)
		for i, r := range refs {
			if r.Kind == series.Float {
				reg.Put(r, math.Float64bits(float64(k)))
			} else {
				reg.Put(r, k*uint64(i+1))
			}
		}
		reg.Commit()
	}
	scan()
	scan()
	return reg, h, scan
}

var benchRules = []Rule{
	{Name: "queue", Selector: selector.MustParse(`{metric="queue.len", queue=~"1.*"}`), Op: OpGT, Threshold: 0},
	{Name: "rss", Selector: selector.MustParse(`{metric="process.memory.rss", pid="1500"}`), Op: OpGT, Threshold: 0},
	{Name: "apps", Selector: selector.MustParse(`{metric=~"app\\..*"}`), Op: OpGT, Threshold: 0},
}

// BenchmarkEval: one evaluation after a scan of 100k series with the four built-in rules and
// three selector rules: "cached" is the engine (selectors matched once, each scan reads the
// matched series' latest points); "rematch" matches every selector against every series at
// every scan, as a rule answered through /api/v1/metrics would; "builtin-rematch" is one pass
// of the default agent (built-in rules only: CPU and memory series looked up by key, mounts
// found by the pass), which runs at most every 30 scans.
func BenchmarkEval(b *testing.B) {
	reg, h, _ := benchRegistry(b, 100_000)
	cfg := Config{Node: "n", Rules: benchRules, CPUBusy: 90, MemAvail: 10, FSAvail: 10, NodeDown: true, Peers: func() []PeerState { return nil }}
	for _, mode := range []string{"cached", "rematch", "builtin-rematch"} {
		b.Run(mode, func(b *testing.B) {
			c := cfg
			switch mode {
			case "rematch":
				c.RematchScans = 1
			case "builtin-rematch": // the default agent: no rules file, the pass finds mounts
				c.RematchScans, c.Rules = 1, nil
			}
			e := New(c)
			v := reg.View()
			e.Eval(v, h)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if mode != "cached" {
					e.needMatch, e.sinceMatch = true, fsRematchScans
				}
				e.Eval(v, h)
			}
			b.ReportMetric(float64(len(e.Alerts().Alerts)), "alerts")
		})
	}
}
