package selector

import (
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// corpus returns n series spread over 100 metric names.
func corpus(n int) []series.Labels {
	out := make([]series.Labels, n)
	for i := range out {
		out[i] = series.Labels{
			"metric":  "app.metric" + strconv.Itoa(i%100),
			"pid":     strconv.Itoa(1000 + i/100),
			"process": "app" + strconv.Itoa(i/100%7),
		}
	}
	return out
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(`app.metric7{pid!="1", process=~"app[0-3]"}`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatch measures one Match call per series against 100k series.
func BenchmarkMatch(b *testing.B) {
	all := corpus(100_000)
	for _, sel := range []string{
		`app.metric7`,
		`{metric=~"app\\.metric(7|8)", process!="app3"}`,
		`{metric=~"app.metric7.*", pid=~"10[0-4]."}`,
	} {
		s := MustParse(sel)
		b.Run(sel, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, l := range all {
					if s.Match(l) {
						n++
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all)), "ns/series")
		})
	}
}

// BenchmarkIndexed is the same query as BenchmarkMatch/app.metric7 through a metric-name index:
// what MetricName enables.
func BenchmarkIndexed(b *testing.B) {
	all := corpus(100_000)
	index := map[string][]series.Labels{}
	for _, l := range all {
		index[l["metric"]] = append(index[l["metric"]], l)
	}
	s := MustParse(`app.metric7{pid!="1"}`)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		name, ok := s.MetricName()
		if !ok {
			b.Fatal("no metric name")
		}
		for _, l := range index[name] {
			if s.Match(l) {
				n++
			}
		}
	}
}
