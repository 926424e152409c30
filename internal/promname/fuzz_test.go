package promname

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

var (
	validMetric = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	validLabel  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// FuzzMap maps series with arbitrary names and labels (applications and pushes choose them):
// every result has a valid Prometheus name and valid, distinct label names, none reserved.
func FuzzMap(f *testing.F) {
	for _, s := range [][4]string{
		{"cpu.user_ms", "cpu", "0", "\x01"},
		{"memory.Active(anon)", "", "", "\x02"},
		{"net.Tcp.RetransSegs", "", "", "\x01"},
		{"pressure.cpu.some_avg10", "", "", "\x03"},
		{"process.cpu.user_ms", "pid", "1", "\x01"},
		{"fs.avail", "device", "/dev/vda1", "\x02"},
		{"worker.state", "state", "x", "\x04"},
		{"__name__", "__x", "", "\x01"},
		{"ünï:c.ode", "a b", "\xff", "\x02"},
		{"vmstat.pgfault", "", "", "\x01"},
		// With a second byte of kind odd, the series has textfile="/t/a.prom" (a *.prom file's).
		{"backupRuns_total", "jobName", "db", "\x02\x01"},
		{"__x", "__y", "v", "\x02\x01"},
		{"ok_name", "__y", "v", "\x02\x01"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	m := New(Options{})
	f.Fuzz(func(t *testing.T, metric, label, value, kind string) {
		l := series.Labels{"metric": metric}
		if label != "" && label != "metric" {
			l[label] = value
		}
		if len(kind) > 1 && kind[1]&1 != 0 && label != "textfile" {
			l["textfile"] = "/t/a.prom"
		}
		k := series.Counter
		if kind != "" {
			k = series.Kind(kind[0]%5 + 1)
		}
		s, ok := m.Map(l, k)
		if !ok {
			return
		}
		if !validMetric.MatchString(s.Name) || strings.HasPrefix(s.Name, "__") {
			t.Fatalf("%v: name %q", l, s.Name)
		}
		seen := map[string]bool{}
		for i, lb := range s.Labels {
			if !validLabel.MatchString(lb.Name) || strings.HasPrefix(lb.Name, "__") || seen[lb.Name] {
				t.Fatalf("%v: labels %v", l, s.Labels)
			}
			if i > 0 && s.Labels[i-1].Name > lb.Name {
				t.Fatalf("%v: labels not sorted: %v", l, s.Labels)
			}
			seen[lb.Name] = true
		}
		if s.Type == Info && !s.Machine && seen[StateLabel] {
			t.Fatalf("%v: a state's labels %v take the state label", l, s.Labels)
		}
	})
}
