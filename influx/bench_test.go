package influx

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// reportCPU adds cpu-ns/op, the process CPU time per operation, to a benchmark: on a shared
// machine wall-clock ns/op also counts the time other processes held the CPU. Call the
// returned function after the loop.
func reportCPU(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		end, ok2 := processCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// benchMetric is a typical ECS metric: two tags, two fields.
func benchMetric() Metric {
	m := NewMetric("kafka", time.Unix(1746457955, 0))
	m.AddTag("subsystem", "ECS")
	m.AddTag("topic", "aliecs.run")
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 42)
	return m
}

// Send into a bucket that exists: the steady state of an application sending a metric many
// times per second. The metric is reused, as the Metric docs recommend.
func BenchmarkSend(b *testing.B) {
	mon := mustNew(b, Config{})
	m := benchMetric()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if err := mon.Send(&m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSendHistogrammable(b *testing.B) {
	mon := mustNew(b, Config{})
	m := benchMetric()
	b.ReportAllocs()
	defer reportCPU(b)()
	i := uint64(0)
	for b.Loop() {
		i++
		m.SetFieldUInt64("send_bytes", i) // the reservoir fills, then replaces at random
		if err := mon.SendHistogrammable(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendNewSecond advances the timestamp one second every 1000 sends, so buckets are
// created and (after Retention) recycled: steady state includes bucket churn.
func BenchmarkSendNewSecond(b *testing.B) {
	mon := mustNew(b, Config{Retention: 10 * time.Millisecond})
	m := benchMetric()
	b.ReportAllocs()
	defer reportCPU(b)()
	sec := int64(0)
	i := 0
	for b.Loop() {
		if i++; i%1000 == 0 {
			sec++
			m.SetTimestamp(time.Unix(sec, 0))
		}
		if err := mon.Send(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendNow leaves the timestamp zero, so Send reads the clock.
func BenchmarkSendNow(b *testing.B) {
	mon := mustNew(b, Config{})
	m := benchMetric()
	m.SetTimestamp(time.Time{})
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if err := mon.Send(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildAndSend builds a fresh Metric per call, as the ECS examples do.
func BenchmarkBuildAndSend(b *testing.B) {
	mon := mustNew(b, Config{})
	ts := time.Unix(1746457955, 0)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		m := NewMetric("kafka", ts)
		m.AddTag("subsystem", "ECS")
		m.AddTag("topic", "aliecs.run")
		m.SetFieldUInt64("send_bytes", 1638400)
		m.SetFieldUInt64("sent_messages", 42)
		if err := mon.Send(&m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSendParallel(b *testing.B) {
	mon := mustNew(b, Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := benchMetric()
		for pb.Next() {
			if err := mon.Send(&m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkScrape encodes 1000 buckets (500 summed, 500 histogrammable with 100 values each).
func BenchmarkScrape(b *testing.B) {
	mon := mustNew(b, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	m := benchMetric()
	for i := range 500 {
		m.SetTimestamp(time.Unix(int64(i), 0))
		for j := range 100 {
			m.SetFieldUInt64("send_bytes", uint64(j))
			mon.Send(&m)
			mon.SendHistogrammable(&m)
		}
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = mon.AppendLines(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}
