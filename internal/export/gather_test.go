package export

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cantal-go/cantal/internal/series"
)

// The process_* self-metrics of client_golang's process collector are written after the
// series, in both formats, and the whole exposition parses with Prometheus' own parser; a
// family a series took already is not written twice.
func TestGatheredSelfMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	clash := &dto.MetricFamily{Name: strPtr("process_open_files"), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: floatPtr(1)}}}}
	gather := func() []*dto.MetricFamily {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		return append(mfs, clash)
	}
	samples := append(agentSamples(), series.Sample{Labels: series.Labels{"metric": "process.open_files"}, Kind: series.Float,
		Bits: math.Float64bits(7), TS: 1700000000000})
	for _, f := range []Format{FormatText, FormatOpenMetrics} {
		e := Prom{Options: Options{Gather: gather}}
		out := e.Append(nil, samples, f)
		var fams map[string]*dto.MetricFamily
		var err error
		if f == FormatText {
			p := expfmt.NewTextParser(model.LegacyValidation)
			fams, err = p.TextToMetricFamilies(bytes.NewReader(out))
		} else {
			if !bytes.HasSuffix(out, []byte("# EOF\n")) || bytes.Count(out, []byte("# EOF")) != 1 {
				t.Errorf("OpenMetrics: one # EOF at the end:\n%s", out)
			}
		}
		if err != nil {
			t.Fatalf("format %v: %v\n%s", f, err, out)
		}
		for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
			"process_max_fds", "process_virtual_memory_bytes", "process_start_time_seconds"} {
			want := "\n" + name + " "
			if f == FormatText && (fams[name] == nil || len(fams[name].Metric) != 1) {
				t.Errorf("text: family %s: %v", name, fams[name])
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("format %v: no %s sample", f, name)
			}
		}
		if f == FormatText {
			if v := fams["process_resident_memory_bytes"].Metric[0].GetGauge().GetValue(); v < 1<<20 {
				t.Errorf("process_resident_memory_bytes %v", v)
			}
			if g := fams["process_open_files"]; g == nil || len(g.Metric) != 1 || g.Metric[0].GetGauge().GetValue() != 7 {
				t.Errorf("process_open_files: the series' family, once: %v", g)
			}
		}
	}
}

func strPtr(s string) *string     { return &s }
func floatPtr(v float64) *float64 { return &v }

// BenchmarkSelfMetrics: what the process_* families add to one exposition (client_golang's
// process collector reads /proc/self at each gather).
func BenchmarkSelfMetrics(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	e := Prom{Options: Options{Gather: func() []*dto.MetricFamily { m, _ := reg.Gather(); return m }}}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Append(buf[:0], nil, FormatText)
	}
}
