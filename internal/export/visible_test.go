package export

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

type callerKey struct{}

// visibleFor hides the series of pid 43 from requests whose context says "restricted", as
// api.Server.SeriesVisible hides other users' processes.
func visibleFor(ctx context.Context) func(series.Labels) bool {
	if ctx.Value(callerKey{}) != "restricted" {
		return nil
	}
	return func(l series.Labels) bool { return l["pid"] != "43" }
}

// TestExportOmitsInvisibleSeries: /metrics and /influx leave out the series a request's caller may
// not see, keep every other, and never touch what the source returned.
//
// Security finding 12.
func TestExportOmitsInvisibleSeries(t *testing.T) {
	samples := agentSamples()
	orig := slices.Clone(samples)
	source := func() []series.Sample { return samples }
	prom := PrometheusHandler(source, Options{Visible: visibleFor})
	influx := InfluxHandler(source, Influx{Visible: visibleFor})
	get := func(name string, restricted bool) string {
		t.Helper()
		r := httptest.NewRequest("GET", "/metrics", nil)
		if restricted {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, "restricted"))
		}
		w := httptest.NewRecorder()
		if name == "prom" {
			prom.ServeHTTP(w, r)
		} else {
			influx.ServeHTTP(w, r)
		}
		b, _ := io.ReadAll(w.Result().Body)
		return string(b)
	}
	for _, name := range []string{"prom", "influx"} {
		for i := 0; i < 3; i++ { // pooled slices reused across requests
			open, restricted := get(name, false), get(name, true)
			if !strings.Contains(open, `pid="43"`) && !strings.Contains(open, `pid=43`) {
				t.Fatalf("%s, every series visible: pid 43 missing:\n%s", name, open)
			}
			if strings.Contains(restricted, "43") {
				t.Errorf("%s, pid 43 hidden: still there:\n%s", name, restricted)
			}
			for _, want := range []string{"42", "eth0", "x.service"} {
				if !strings.Contains(restricted, want) {
					t.Errorf("%s, pid 43 hidden: %s missing too:\n%s", name, want, restricted)
				}
			}
		}
	}
	for i := range samples {
		if samples[i].Labels["metric"] != orig[i].Labels["metric"] || samples[i].Bits != orig[i].Bits {
			t.Fatalf("the source's samples were modified: %+v; was %+v", samples[i], orig[i])
		}
	}
}
