package ecs

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchMetric is the ECS design document's example: two tags, two fields.
func benchMetric() Metric {
	m := NewMetric("kafka", time.Unix(1746457955, 0))
	m.AddTag("subsystem", "ECS")
	m.AddTag("topic", "aliecs.run")
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 1)
	return m
}

// benchRun starts Run on a free port and returns a function that scrapes the endpoint and
// stops.
func benchRun(b *testing.B) (scrapeAndStop func() string) {
	done := make(chan error, 1)
	go func() { done <- Run(0, "/metrics") }()
	if !WaitUntilRunning(5 * time.Second) {
		b.Fatal("not running")
	}
	_, port, _ := net.SplitHostPort(Addr())
	return func() string {
		defer func() { Stop(); <-done }()
		resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
}

// field returns the value of field key in the scrape, from "key=" to the next ',' or ' '.
func fieldValue(b *testing.B, scrape, key string) uint64 {
	i := strings.Index(scrape, key+"=")
	if i < 0 {
		b.Fatalf("scrape lacks %s: %.200q", key, scrape)
	}
	v := scrape[i+len(key)+1:]
	v = v[:strings.IndexAny(v, ", ")]
	n, err := strconv.ParseUint(strings.TrimSuffix(v, "u"), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// reportAccepted reports the cost per accepted metric and the share dropped; the scrape
// after the loop tells how many were accepted.
func reportAccepted(b *testing.B, accepted uint64) {
	n := uint64(b.N)
	if accepted > n {
		b.Fatalf("accepted %d of %d", accepted, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(accepted, 1)), "ns/accepted")
	b.ReportMetric(100*float64(n-accepted)/float64(n), "%dropped")
}

// BenchmarkSend: a tight loop of Send into one bucket (one series, one second).
func BenchmarkSend(b *testing.B) {
	scrape := benchRun(b)
	m := benchMetric()
	b.ReportAllocs()
	for b.Loop() {
		Send(&m)
	}
	reportAccepted(b, fieldValue(b, scrape(), "sent_messages"))
}

// BenchmarkSendHistogrammable: a tight loop of SendHistogrammable into one second; the
// reservoirs fill, then replace at random.
func BenchmarkSendHistogrammable(b *testing.B) {
	scrape := benchRun(b)
	m := benchMetric()
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		m.SetFieldUInt64("send_bytes", i)
		SendHistogrammable(&m)
	}
	reportAccepted(b, fieldValue(b, scrape(), "send_bytes_count"))
}

// BenchmarkBuildAndSend builds a fresh Metric per call, as ECS's callers do.
func BenchmarkBuildAndSend(b *testing.B) {
	scrape := benchRun(b)
	ts := time.Unix(1746457955, 0)
	b.ReportAllocs()
	for b.Loop() {
		m := NewMetric("kafka", ts)
		m.AddTag("subsystem", "ECS")
		m.AddTag("topic", "aliecs.run")
		m.SetFieldUInt64("send_bytes", 1638400)
		m.SetFieldUInt64("sent_messages", 1)
		Send(&m)
	}
	reportAccepted(b, fieldValue(b, scrape(), "sent_messages"))
}

func BenchmarkSendParallel(b *testing.B) {
	scrape := benchRun(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := benchMetric()
		for pb.Next() {
			Send(&m)
		}
	})
	reportAccepted(b, fieldValue(b, scrape(), "sent_messages"))
}
