package api

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// peerHistoryBody is a peer's /api/v1/history answer of n series of pts points each (one a
// second, values of every shape the wire carries: integers, fractions, NaN).
func peerHistoryBody(n, pts int) []byte {
	b := []byte(`{"series":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"labels":{"metric":"disk.read","disk":"sd`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `"},"kind":"counter","fn":"rate","points":[`...)
		for j := 0; j < pts; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, 1_790_000_000_000+int64(j)*1000, 10)
			b = append(b, ',')
			switch j % 3 {
			case 0:
				b = strconv.AppendInt(b, int64(i*j), 10)
			case 1:
				b = strconv.AppendFloat(b, float64(j)/7, 'g', -1, 64)
			default:
				b = append(b, `"NaN"`...)
			}
			b = append(b, ']')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}\n"...)
}

// BenchmarkPeerHistoryMerge measures the cluster history's merge of one peer's fetched
// /api/v1/history answer (1000 series × 1800 points) into the node's series array of the
// answer: decode, visibility filter, node label, encode (into a buffer sized from the fetched
// answer, as clusterHistory sizes its answer).
func BenchmarkPeerHistoryMerge(b *testing.B) {
	body := peerHistoryBody(1000, 1800)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := apiwire.AppendHistoryList(make([]byte, 0, len(body)+len(body)/8), peerHistorySeries(body, "peer-1", noProcessSeries))
		if len(out) < len(body)/2 {
			b.Fatalf("merged %d bytes of %d", len(out), len(body))
		}
	}
}

// BenchmarkPeerHistoryMergeAgg is BenchmarkPeerHistoryMerge with agg=sum: the merged series
// are aggregated as well (one group).
func BenchmarkPeerHistoryMergeAgg(b *testing.B) {
	body := peerHistoryBody(1000, 1800)
	_, g, err := parseAgg(url.Values{"agg": {"sum"}, "by": {"metric"}})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ss := peerHistorySeries(body, "peer-1", noProcessSeries)
		out := apiwire.AppendHistoryList(make([]byte, 0, len(body)+len(body)/8), ss)
		agg := appendHistoryAggregate(nil, "sum", g, []aggNode{{series: ss}})
		if len(out) < len(body)/2 || len(agg) < 1000 {
			b.Fatalf("merged %d bytes of %d, aggregate %d", len(out), len(body), len(agg))
		}
	}
}
