package export

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/series"
)

// TestBuildInfoGauge checks cantal_build_info on /metrics: one gauge of value 1 whose labels
// are the build's, escaped (a version with a quote stays one label), in both formats.
func TestBuildInfoGauge(t *testing.T) {
	in := buildinfo.Info{Version: `1.2.3-"rc"`, Revision: "abc123-dirty", GoVersion: "go1.26.8"}
	h := PrometheusHandler(func() []series.Sample { return agentSamples() }, Options{BuildInfo: &in})
	get := func(accept string) string {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return string(b)
	}
	text := get("")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	fam := fams["cantal_build_info"]
	if fam == nil || fam.GetType().String() != "GAUGE" || len(fam.Metric) != 1 {
		t.Fatalf("cantal_build_info = %v; want one gauge", fam)
	}
	m := fam.Metric[0]
	got := map[string]string{}
	for _, l := range m.Label {
		got[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || got["version"] != in.Version || got["revision"] != in.Revision || got["goversion"] != in.GoVersion || len(got) != 3 {
		t.Errorf("cantal_build_info = %v %v; want labels %+v, value 1", got, m.GetGauge().GetValue(), in)
	}
	if len(fams) < 2 {
		t.Errorf("the samples are gone: %d families", len(fams))
	}
	om := get("application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(om, "# HELP cantal_build_info ") || !strings.Contains(om, `cantal_build_info{version="1.2.3-\"rc\"",revision="abc123-dirty",goversion="go1.26.8"} 1`+"\n") || !strings.HasSuffix(om, "# EOF\n") {
		t.Errorf("OpenMetrics exposition lacks cantal_build_info first:\n%.400s", om)
	}
	plain := PrometheusHandler(func() []series.Sample { return agentSamples() }, Options{})
	w := httptest.NewRecorder()
	plain.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(w.Body.String(), "cantal_build_info") {
		t.Error("cantal_build_info written without Options.BuildInfo")
	}
}
