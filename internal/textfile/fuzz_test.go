package textfile

import (
	"math"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and what it accepts is well formed: valid names, sorted
// labels without reserved names or empty values, no series twice, a type per family.
func FuzzParse(f *testing.F) {
	f.Add([]byte(backup))
	f.Add([]byte("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 3\n"))
	f.Add([]byte("a{b=\"c\\n\\\"\"} +Inf\n"))
	f.Add([]byte("x{metric=\"y\"} 1\n"))
	f.Add([]byte("with_ts 1 1700000000000\n"))
	f.Add([]byte("same 1\nsame 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, s := range p.Samples {
			if s.Name == "" || strings.ContainsAny(s.Name, " {}\"\n") {
				t.Fatalf("bad name %q", s.Name)
			}
			if _, ok := p.Types[s.Name]; !ok {
				t.Fatalf("no type for %q", s.Name)
			}
			for i, l := range s.Labels {
				if l.Value == "" || l.Name == MetricLabel || l.Name == TextfileLabel || (i > 0 && s.Labels[i-1].Name >= l.Name) {
					t.Fatalf("bad labels %v", s.Labels)
				}
			}
			k := seriesKey(s.Name, s.Labels)
			if seen[k] {
				t.Fatalf("series twice: %v", s)
			}
			seen[k] = true
			_ = math.IsNaN(s.Value)
		}
	})
}
