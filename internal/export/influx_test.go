package export

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/ingest"
	"github.com/cantal-go/cantal/internal/series"
)

func TestInfluxLines(t *testing.T) {
	var e Influx
	out, err := e.Append(nil, agentSamples())
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		"cpu user_seconds=12345i 1700000000000000000\n",
		"requests,pid=42,process=nginx number=7i 1700000000000000000\n",
		"worker,pid=42 state=\"processing \\\"job\\\" 7\" 1700000000000000000\n",
		"queue,cgroup=/system.slice/x.service depth=-5i 1700000000000000000\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "p99") || strings.Contains(s, "pid=44") {
		t.Errorf("NaN/Inf or an empty state was written:\n%s", s)
	}
	e.Unsigned, e.Precision = true, 2 // lineprotocol.Millisecond
	out, _ = e.Append(nil, agentSamples()[:1])
	if string(out) != "cpu user_seconds=12345u 1700000000000\n" {
		t.Errorf("unsigned ms output = %q", out)
	}
}

// TestInfluxHostTag checks the node's host tag, sorted among the others, on every line, and
// that a sample's own host label wins.
func TestInfluxHostTag(t *testing.T) {
	e := Influx{HostTag: "host", Host: "web 1"}
	in := append(agentSamples()[:4], series.Sample{Labels: series.Labels{"metric": "temp.c", "host": "sensor7"}, Kind: series.Level, Bits: 22, TS: 1700000000000})
	out, err := e.Append(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	want := "cpu,host=web\\ 1 user_seconds=12345i 1700000000000000000\n" +
		"memory,host=web\\ 1 used_bytes=1073741824i 1700000000000000000\n" +
		"load,host=web\\ 1 one=0.42 1700000000000000000\n" +
		"requests,host=web\\ 1,pid=42,process=nginx number=7i 1700000000000000000\n" +
		"temp,host=sensor7 c=22i 1700000000000000000\n"
	if string(out) != want {
		t.Errorf("Append with a host tag =\n%s\nwant\n%s", out, want)
	}
	e = Influx{HostTag: "host"} // no node name: no tag
	out, _ = e.Append(nil, agentSamples()[:1])
	if string(out) != "cpu user_seconds=12345i 1700000000000000000\n" {
		t.Errorf("Append without a host = %q", out)
	}
}

// TestInfluxRoundTrip reads the Influx output back with the agent's own /write parser: the
// labels and values come out as they went in (counters become levels, as integers do).
func TestInfluxRoundTrip(t *testing.T) {
	var e Influx
	e.Unsigned = true
	in := agentSamples()
	out, err := e.Append(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	points, errs := ingest.ParseLines(out, ingest.Nanosecond, 0)
	if len(errs) != 0 {
		t.Fatalf("ParseLines(own output): %v\n%s", errs, out)
	}
	got := map[string]ingest.Point{}
	for _, p := range points {
		got[p.Labels().Key()] = p
	}
	n := 0
	for _, s := range in {
		if e.skip(&s) {
			continue
		}
		n++
		// Empty label values are not tags; text line protocol cannot carry becomes "_".
		l := series.Labels{}
		for k, v := range s.Labels {
			if v != "" {
				if k != "metric" {
					k, v = lpSafe(k), lpSafe(v)
				}
				l[k] = v
			}
		}
		p, ok := got[l.Key()]
		if !ok {
			t.Errorf("series %s lost in the round trip (looked for %s)", s.Labels.Key(), l.Key())
			continue
		}
		if p.Kind != s.Kind || (s.Kind != series.State && p.Bits != s.Bits) || p.Text != s.Text || p.TS != s.TS {
			t.Errorf("series %s came back as %+v", s.Labels.Key(), p)
		}
	}
	if len(points) != n {
		t.Errorf("%d points back; want %d", len(points), n)
	}
}

func TestHandlers(t *testing.T) {
	src := func() []series.Sample { return append(agentSamples(), benchSamples(100)...) }
	for _, tc := range []struct {
		h      http.Handler
		accept string
		ctype  string
		tail   string
	}{
		{PrometheusHandler(src, Options{}), "", "text/plain; version=0.0.4; charset=utf-8", "\n"},
		{PrometheusHandler(src, Options{}), "application/openmetrics-text; version=1.0.0", "application/openmetrics-text; version=1.0.0; charset=utf-8", "# EOF\n"},
		{InfluxHandler(src, Influx{}), "", "text/plain; charset=utf-8", "\n"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Accept", tc.accept)
		r.Header.Set("Accept-Encoding", "gzip")
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, r)
		if w.Code != 200 || w.Header().Get("Content-Type") != tc.ctype || w.Header().Get("Content-Encoding") != "gzip" {
			t.Errorf("Accept %q: %d %v", tc.accept, w.Code, w.Header())
			continue
		}
		zr, err := gzip.NewReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(zr)
		if !strings.HasSuffix(string(body), tc.tail) || len(body) < 500 {
			t.Errorf("Accept %q: body %q", tc.accept, body)
		}
		r = httptest.NewRequest(http.MethodPost, "/metrics", nil)
		w = httptest.NewRecorder()
		tc.h.ServeHTTP(w, r)
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST = %d; want 405", w.Code)
		}
	}
}

func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"", "text/plain", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5", "*/*;q=x", ";;,=,q="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		if f := Negotiate(accept); f != FormatText && f != FormatOpenMetrics {
			t.Fatalf("Negotiate(%q) = %v", accept, f)
		}
		acceptsGzip(accept)
	})
}
