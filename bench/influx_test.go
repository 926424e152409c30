package bench

// Peer comparison for package influx: recording one labelled sample, the ECS way (a Metric
// with two tags and two fields, aggregated per second) against the closest equivalents in
// prometheus/client_golang (a *Vec looked up by label values each time, as code does that
// does not cache the child) and VictoriaMetrics/metrics (GetOrCreate by full name).
//
//	cd bench && go test -run '^$' -bench 'Send' -benchtime 1s -count 5 .

import (
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantal-go/cantal/influx"
)

func ecsMetric() influx.Metric {
	m := influx.NewMetric("kafka", time.Unix(1746457955, 0))
	m.AddTag("subsystem", "ECS")
	m.AddTag("topic", "aliecs.run")
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 42)
	return m
}

func BenchmarkSend(b *testing.B) {
	b.Run("cantal_influx", func(b *testing.B) {
		mon, err := influx.New(influx.Config{})
		if err != nil {
			b.Fatal(err)
		}
		m := ecsMetric()
		b.ReportAllocs()
		for b.Loop() {
			if err := mon.Send(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client_golang_countervec", func(b *testing.B) {
		bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_send_bytes"}, []string{"subsystem", "topic"})
		msgs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_sent_messages"}, []string{"subsystem", "topic"})
		b.ReportAllocs()
		for b.Loop() {
			bytes.WithLabelValues("ECS", "aliecs.run").Add(1638400)
			msgs.WithLabelValues("ECS", "aliecs.run").Add(42)
		}
	})
	b.Run("victoriametrics_counter", func(b *testing.B) {
		s := vm.NewSet()
		b.ReportAllocs()
		for b.Loop() {
			s.GetOrCreateCounter(`kafka_send_bytes{subsystem="ECS",topic="aliecs.run"}`).Add(1638400)
			s.GetOrCreateCounter(`kafka_sent_messages{subsystem="ECS",topic="aliecs.run"}`).Add(42)
		}
	})
}

func BenchmarkSendHistogrammable(b *testing.B) {
	b.Run("cantal_influx", func(b *testing.B) {
		mon, err := influx.New(influx.Config{})
		if err != nil {
			b.Fatal(err)
		}
		m := ecsMetric()
		b.ReportAllocs()
		i := uint64(0)
		for b.Loop() {
			i++
			m.SetFieldUInt64("send_bytes", i)
			if err := mon.SendHistogrammable(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client_golang_histogramvec", func(b *testing.B) {
		bytes := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka_send_bytes"}, []string{"subsystem", "topic"})
		msgs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka_sent_messages"}, []string{"subsystem", "topic"})
		b.ReportAllocs()
		i := 0.0
		for b.Loop() {
			i++
			bytes.WithLabelValues("ECS", "aliecs.run").Observe(i)
			msgs.WithLabelValues("ECS", "aliecs.run").Observe(42)
		}
	})
	b.Run("victoriametrics_histogram", func(b *testing.B) {
		s := vm.NewSet()
		b.ReportAllocs()
		i := 0.0
		for b.Loop() {
			i++
			s.GetOrCreateHistogram(`kafka_send_bytes{subsystem="ECS",topic="aliecs.run"}`).Update(i)
			s.GetOrCreateHistogram(`kafka_sent_messages{subsystem="ECS",topic="aliecs.run"}`).Update(42)
		}
	})
}
