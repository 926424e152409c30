package ingest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// heapPeak samples the heap's live objects every 200 µs until stop is called, which returns the
// highest growth seen over the first sample, in bytes. A sample, not an exact peak: reported by
// benchmarks, never asserted.
func heapPeak() (stop func() int64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	runtime.GC()
	base := read()
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			peak = max(peak, read()-base)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return max(peak, read()-base)
	}
}

// bombBody returns line, repeated to fill size bytes, gzip-compressed at the best ratio.
func bombBody(tb testing.TB, line string, size int) []byte {
	tb.Helper()
	var zb bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	if err != nil {
		tb.Fatal(err)
	}
	chunk := bytes.Repeat([]byte(line), 64<<10/len(line))
	for n := 0; n < size; n += len(chunk) {
		c := chunk
		if size-n < len(c) {
			c = c[:(size-n)/len(line)*len(line)]
		}
		zw.Write(c)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return zb.Bytes()
}

// BenchmarkFinding05_GzipBomb measures one POST /write of a small gzip body that decompresses to
// a body just under the default 32 MiB limit (the security issue's finding 5: a 48 KB gzip body
// cost 444 MiB and 35 s of CPU). Each case is a line repeated: "valid" stores one series
// again and again, "errors" is a line that does not parse, "refused" is a new series refused by
// a full push budget. B/op is what one request allocates; sec/op its CPU-bound time;
// peak-heap-MB the largest growth of the live heap sampled during a request. The sizes are the
// decompressed bodies. Run with -benchtime=1x: the unbounded code took minutes for
// the larger cases.
func BenchmarkFinding05_GzipBomb(b *testing.B) {
	for _, tc := range []struct {
		name, line string
		size       int
	}{
		{"valid/32MiB", "m v=1\n", 32<<20 - 64},
		{"errors/32MiB", "m v=\n", 32<<20 - 64},
		{"refused/1MiB", "n v=1\n", 1 << 20},
		{"refused/32MiB", "n v=1\n", 32<<20 - 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := bombBody(b, tc.line, tc.size)
			p := New(Config{MaxSeries: 1})
			h := p.WriteHandler()
			post := func(body []byte, gz bool) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/write", bytes.NewReader(body))
				if gz {
					r.Header.Set("Content-Encoding", "gzip")
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			if w := post([]byte("m v=1\n"), false); w.Code != http.StatusNoContent {
				b.Fatal(w.Code, w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var peak int64
			for b.Loop() {
				stop := heapPeak()
				w := post(body, true)
				peak = max(peak, stop())
				if w.Code == http.StatusNoContent && tc.name[:5] != "valid" {
					b.Fatal("accepted")
				}
				if b.N == 1 {
					b.Logf("%s: %d %s", tc.name, w.Code, cutForLog(w.Body.String()))
				}
			}
			b.ReportMetric(float64(len(body)), "gzip-bytes")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

func cutForLog(s string) string {
	if len(s) > 200 {
		return fmt.Sprintf("%s... (%d bytes)", s[:200], len(s))
	}
	return s
}
