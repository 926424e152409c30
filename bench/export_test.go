package bench

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/export"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// exportSamples returns n samples shaped like an agent's: 50 metric names over n/50
// processes, three labels each, a mix of counters, levels and floats.
func exportSamples(n int) []series.Sample {
	s := make([]series.Sample, n)
	for i := range s {
		pid := strconv.Itoa(i / 50)
		l := series.Labels{"metric": "app.metric" + strconv.Itoa(i%50) + ".value", "pid": pid, "process": "proc" + strconv.Itoa(i/50%97), "cgroup": "/system.slice/unit" + pid + ".service"}
		switch i % 3 {
		case 0:
			s[i] = series.Sample{Labels: l, Kind: series.Counter, Bits: uint64(i) * 1000, TS: 1700000000000}
		case 1:
			s[i] = series.Sample{Labels: l, Kind: series.Level, Bits: uint64(i), TS: 1700000000000}
		default:
			s[i] = series.Sample{Labels: l, Kind: series.Float, Bits: math.Float64bits(float64(i) / 7), TS: 1700000000000}
		}
	}
	return s
}

// expfmtEncode is the peer: the samples turned into client_model MetricFamily protobufs (as a
// client_golang collector would) and written with prometheus/common/expfmt's text encoder.
func expfmtEncode(buf *bytes.Buffer, samples []series.Sample) error {
	fams := map[string]*dto.MetricFamily{}
	var names []string
	for i := range samples {
		s := &samples[i]
		name := "app_" + s.Labels["metric"][4:]
		typ := dto.MetricType_GAUGE
		if s.Kind == series.Counter {
			name += "_total"
			typ = dto.MetricType_COUNTER
		}
		for j := 0; j < len(name); j++ {
			if name[j] == '.' {
				name = name[:j] + "_" + name[j+1:]
			}
		}
		f, ok := fams[name]
		if !ok {
			f = &dto.MetricFamily{Name: proto.String(name), Help: proto.String("Cantal metric"), Type: typ.Enum()}
			fams[name] = f
			names = append(names, name)
		}
		m := &dto.Metric{}
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			if k != "metric" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(k), Value: proto.String(s.Labels[k])})
		}
		v := s.Float()
		if s.Kind == series.Counter {
			m.Counter = &dto.Counter{Value: proto.Float64(v)}
		} else {
			m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
		}
		f.Metric = append(f.Metric, m)
	}
	enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, n := range names {
		if err := enc.Encode(fams[n]); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkExportProm100k encodes 100k series in the Prometheus text format with
// internal/export and with the peer (client_model + expfmt), both in every iteration, and
// reports each one's process CPU time per encoding and the ratio expfmt/cantal. CPU time, not
// wall time, is the figure to read on a shared machine.
//
//	cd bench && go test -run '^$' -bench ExportProm100k -benchtime 10x
func BenchmarkExportProm100k(b *testing.B) {
	samples := exportSamples(100000)
	var e export.Prom
	var out []byte
	var peer bytes.Buffer
	var ours, theirs time.Duration
	b.ReportAllocs()
	for b.Loop() {
		c0 := cputime.Process()
		out = e.Append(out[:0], samples, export.FormatText)
		c1 := cputime.Process()
		peer.Reset()
		if err := expfmtEncode(&peer, samples); err != nil {
			b.Fatal(err)
		}
		c2 := cputime.Process()
		ours += c1 - c0
		theirs += c2 - c1
	}
	n := float64(b.N)
	b.ReportMetric(ours.Seconds()*1000/n, "cantal-cpu-ms/op")
	b.ReportMetric(theirs.Seconds()*1000/n, "expfmt-cpu-ms/op")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "expfmt/cantal")
	b.ReportMetric(float64(len(out)), "cantal-bytes")
	b.ReportMetric(float64(peer.Len()), "expfmt-bytes")
}
