package bench

// ECS compatibility: the cost per accepted metric of Send and SendHistogrammable, in a tight
// loop into one series and one second, for the default package influx and for its ECS facade
// influx/ecs (ECS's package-level API and output). Both aggregate synchronously: %dropped must
// be 0. ns/accepted is the loop's time divided by the metrics the scrape after it accounts for.
//
//	cd bench && go test -run '^$' -bench 'ECSCompat' -benchtime 1s -count 5 .
//
// The real ECS (github.com/AliceO2Group/Control, package common/monitoring) is not in this
// comparison: the Go module proxy does not serve it ("403 Forbidden: This module version is not
// available" for github.com/AliceO2Group/Control/@v/list), and it is not vendored here. ECS
// queues each Send into a channel of 100000 metrics drained by one goroutine and drops what
// overflows, so its cost per accepted metric under a tight loop is its cost per call divided by
// the share it keeps.

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/influx"
	"github.com/cantal-go/cantal/influx/ecs"
)

func ecsFacadeMetric() ecs.Metric {
	m := ecs.NewMetric("kafka", time.Unix(1746457955, 0))
	m.AddTag("subsystem", "ECS")
	m.AddTag("topic", "aliecs.run")
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 1)
	return m
}

// reportAccepted reports ns/accepted and %dropped.
func reportAccepted(b *testing.B, accepted uint64) {
	n := uint64(b.N)
	if accepted > n {
		b.Fatalf("accepted %d of %d", accepted, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(accepted, 1)), "ns/accepted")
	b.ReportMetric(100*float64(n-accepted)/float64(n), "%dropped")
}

// fieldValue returns the integer value of field key in a scrape.
func fieldValue(b *testing.B, scrape, key string) uint64 {
	i := strings.Index(scrape, key+"=")
	if i < 0 {
		b.Fatalf("scrape lacks %s: %.200q", key, scrape)
	}
	v := scrape[i+len(key)+1:]
	v = v[:strings.IndexAny(v, ", ")]
	n, err := strconv.ParseFloat(strings.TrimRight(v, "iu"), 64)
	if err != nil {
		b.Fatal(err)
	}
	return uint64(n)
}

// runFacade starts ecs.Run on a free port; the function it returns scrapes once and stops.
func runFacade(b *testing.B) func() string {
	done := make(chan error, 1)
	go func() { done <- ecs.Run(0, "/ecsmetrics") }()
	if !ecs.WaitUntilRunning(5 * time.Second) {
		b.Fatal("ecs: not running")
	}
	_, port, _ := net.SplitHostPort(ecs.Addr())
	return func() string {
		defer func() { ecs.Stop(); <-done }()
		resp, err := http.Get("http://127.0.0.1:" + port + "/ecsmetrics")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
}

func BenchmarkECSCompatSend(b *testing.B) {
	b.Run("influx", func(b *testing.B) {
		mon, err := influx.New(influx.Config{})
		if err != nil {
			b.Fatal(err)
		}
		m := ecsMetric()
		m.SetFieldUInt64("sent_messages", 1)
		b.ReportAllocs()
		for b.Loop() {
			if err := mon.Send(&m); err != nil {
				b.Fatal(err)
			}
		}
		reportAccepted(b, fieldValue(b, string(mon.AppendLines(nil)), "sent_messages"))
	})
	b.Run("influx_ecs", func(b *testing.B) {
		scrape := runFacade(b)
		m := ecsFacadeMetric()
		b.ReportAllocs()
		for b.Loop() {
			ecs.Send(&m)
		}
		reportAccepted(b, fieldValue(b, scrape(), "sent_messages"))
	})
}

func BenchmarkECSCompatSendHistogrammable(b *testing.B) {
	for _, st := range []struct {
		name  string
		stats influx.Statistics
	}{{"influx", influx.StatisticsDefault}, {"influx_statistics_ecs", influx.StatisticsECS}} {
		b.Run(st.name, func(b *testing.B) {
			mon, err := influx.New(influx.Config{Statistics: st.stats})
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
			reportAccepted(b, fieldValue(b, string(mon.AppendLines(nil)), "send_bytes_count"))
		})
	}
	b.Run("influx_ecs", func(b *testing.B) {
		scrape := runFacade(b)
		m := ecsFacadeMetric()
		b.ReportAllocs()
		i := uint64(0)
		for b.Loop() {
			i++
			m.SetFieldUInt64("send_bytes", i)
			ecs.SendHistogrammable(&m)
		}
		reportAccepted(b, fieldValue(b, scrape(), "send_bytes_count"))
	})
}
