package export

import (
	"bytes"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FuzzPromExposition encodes samples with arbitrary names, labels and texts (applications and
// pushes choose them), beside machine, process and statsd-timer series: the text exposition
// always parses with prometheus/common's parser, every family once.
func FuzzPromExposition(f *testing.F) {
	f.Add("requests.number", "path", "/a", "x", uint8(1), "api.latency")
	f.Add("cpu.user_ms", "cpu", "0", "", uint8(1), "x.count")
	f.Add("node_cpu_seconds", "", "", "", uint8(1), "y")
	f.Add("a.b", "x.y", "1", "", uint8(2), "a")
	f.Add("__name__", "le", "\xff", "t\n", uint8(4), "z.p99_9")
	f.Add("api.latency.p90", "source", "push", "", uint8(3), "api.latency")
	f.Fuzz(func(t *testing.T, metric, label, value, text string, kind uint8, timer string) {
		l := series.Labels{"metric": metric}
		if label != "" && label != "metric" {
			l[label] = value
		}
		push := func(m string) series.Labels { return series.Labels{"metric": m, "source": "push"} }
		samples := append(machineSamples(), procSamples("1", "2")...)
		samples = append(samples,
			series.Sample{Labels: l, Kind: series.Kind(kind%4 + 1), Bits: 7, Text: text, Since: 1},
			series.Sample{Labels: push(timer + ".count"), Kind: series.Counter, Bits: 2},
			series.Sample{Labels: push(timer + ".sum"), Kind: series.Float, Bits: 0x4000000000000000},
			series.Sample{Labels: push(timer + ".median"), Kind: series.Float, Bits: 0x3ff0000000000000},
		)
		var e Prom
		out := e.Append(nil, samples, FormatText)
		p := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := p.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
			t.Fatalf("exposition does not parse: %v\n%s", err, out)
		}
	})
}
