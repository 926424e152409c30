package promcluster

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/promapi"
)

// BenchmarkClusterQuery is an instant query, sum by (node)(rate(node_cpu_seconds_total[1m])),
// and a query_range of node_load1 over the last 5 minutes at a 2 s step, each node holding an
// hour of 2 s scans of its load and 4 CPUs: node-local (nodes=1) and over the local node and
// 20 peers (nodes=21). The peers are in-process fakes: each a real promapi.Handler over its
// own promstore, served by httptest over loopback, asked through hub.Fetcher as the agent does.
func BenchmarkClusterQuery(b *testing.B) {
	const scans = 1800
	now := time.UnixMilli(t0 + (scans-1)*2000)
	at := fmt.Sprint(float64(now.UnixMilli()) / 1000)
	local := node(b, "local", 1, scans, 4)
	var members []hub.Member
	for i := range 20 {
		name := fmt.Sprintf("peer%02d", i)
		srv := httptest.NewServer(promapi.New(node(b, name, float64(i), scans, 4), promapi.Options{Now: func() time.Time { return now }}))
		b.Cleanup(srv.Close)
		members = append(members, hub.Member{ID: name, Name: name, HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true})
	}
	queries := map[string]url.Values{
		"instant": {"query": {`sum by (node)(rate(node_cpu_seconds_total[1m]))`}, "time": {at}},
		"range5m": {"query": {`node_load1`}, "start": {fmt.Sprint(float64(now.UnixMilli()-300_000) / 1000)}, "end": {at}, "step": {"2"}},
	}
	for _, qname := range []string{"instant", "range5m"} {
		for _, nodes := range []int{1, 21} {
			b.Run(fmt.Sprintf("%s/nodes=%d", qname, nodes), func(b *testing.B) {
				ms := members[:nodes-1]
				q := New(local, Options{Members: func() []hub.Member { return ms }, Fetch: &hub.Fetcher{Timeout: time.Second}})
				h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Now: func() time.Time { return now }})
				path := "query"
				if qname == "range5m" {
					path = "query_range"
				}
				b.ReportAllocs()
				for b.Loop() {
					code, a, body := get(b, h, path, queries[qname])
					if code != 200 || len(a.Data.Result) != nodes || len(a.Warnings) > 0 {
						b.Fatalf("%d %d series: %.300s", code, len(a.Data.Result), body)
					}
				}
			})
		}
	}
}

// BenchmarkPeerValuesDecode is the decoding of a peer's values arrays, 100 series of 1800
// points (an hour at 2 s), by parseValues and by encoding/json (the path parseValues spares).
func BenchmarkPeerValuesDecode(b *testing.B) {
	var one strings.Builder
	one.WriteByte('[')
	for i := range 1800 {
		if i > 0 {
			one.WriteByte(',')
		}
		fmt.Fprintf(&one, `[%.3f,"%g"]`, float64(t0+int64(i)*2000)/1000, float64(i)*1.37)
	}
	one.WriteByte(']')
	arr := []byte(one.String())
	b.Run("parseValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for range 100 {
				if _, ok := parseValues(arr); !ok {
					b.Fatal("not read")
				}
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for range 100 {
				var vals []wirePoint
				if err := json.Unmarshal(arr, &vals); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
