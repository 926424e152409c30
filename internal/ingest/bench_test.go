package ingest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func loadBody(lines int) []byte {
	var b bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&b, "cpu,host=node%d,cpu=cpu%d usage_user=%d.5,usage_system=3i 1700000000000000000\n", i%100, i%8, i)
	}
	return b.Bytes()
}

// BenchmarkParseLines measures decoding a 5000-line body (two fields a line).
func BenchmarkParseLines(b *testing.B) {
	body := loadBody(5000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ParseLines(body, Nanosecond, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*5000), "ns/line")
}

// BenchmarkWriteHandler measures the whole /write path for a 5000-line body into existing
// series, and the scan that takes its points (Collect: points are held until a scan stores them).
func BenchmarkWriteHandler(b *testing.B) {
	body := loadBody(5000)
	p := New(Config{})
	h := p.WriteHandler()
	var sink series.Discard
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/write", bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 204 {
			b.Fatal(w.Code, w.Body)
		}
		p.Collect(b.Context(), &sink)
	}
	b.ReportMetric(float64(b.N*5000)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkStatsdPacket measures handling a 10-line statsd packet.
func BenchmarkStatsdPacket(b *testing.B) {
	var pkt bytes.Buffer
	for i := range 10 {
		fmt.Fprintf(&pkt, "app.req%d:%d|c|@0.5|#env:prod,az:a\n", i, i)
	}
	p := New(Config{})
	var l StatsdLine
	b.ReportAllocs()
	for b.Loop() {
		p.handleStatsd(pkt.Bytes(), &l)
	}
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "lines/s")
}
