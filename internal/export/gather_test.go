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

	"github.com/cantal-go/cantal/internal/promname"
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

// A textfile's counter named without _total stays a counter in the text format and is
// "unknown" in OpenMetrics (whose counters' samples end in _total); one with _total is a
// counter in both. The textfile series keep their own names and labels, without textfile.
func TestTextfileCountersInBothFormats(t *testing.T) {
	m := promname.New(promname.Options{TextfileType: func(string) (promname.Type, bool) { return promname.Counter, true }})
	samples := []series.Sample{
		{Labels: series.Labels{"metric": "jobs", "textfile": "/t/a.prom", "jobName": "x"}, Kind: series.Float, Bits: math.Float64bits(5), TS: 1700000000000},
		{Labels: series.Labels{"metric": "runs_total", "textfile": "/t/a.prom"}, Kind: series.Float, Bits: math.Float64bits(2), TS: 1700000000000},
	}
	e := Prom{Options: Options{Mapper: m}}
	text := string(e.Append(nil, samples, FormatText))
	for _, w := range []string{"# TYPE jobs counter\njobs{jobName=\"x\"} 5\n", "# TYPE runs_total counter\nruns_total 2\n", "# HELP jobs Metric read from /t/a.prom\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
	om := string(e.Append(nil, samples, FormatOpenMetrics))
	for _, w := range []string{"# TYPE jobs unknown\njobs{jobName=\"x\"} 5\n", "# TYPE runs counter\nruns_total 2\n"} {
		if !strings.Contains(om, w) {
			t.Errorf("OpenMetrics lacks %q:\n%s", w, om)
		}
	}
}
