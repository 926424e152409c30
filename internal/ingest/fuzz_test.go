package ingest

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// FuzzParseLines checks that any /write body parses without panicking, that every line is
// either kept or reported, and that the points the decoder keeps go through a Push.
func FuzzParseLines(f *testing.F) {
	if b, err := os.ReadFile("testdata/write.lp"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"m v=1", "m,a=b v=1i,w=2u,x=true,y=\"s\" 1", "bad v=\nok v=1", "# c\n\n m v=1 1\r\n",
		"m s=\"a\nb\" 1\nn v=1", "m,metric=x v=1", `m\ ,a\=b=c\,d e\ f=1`, "m v=1 99999999999999999999",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		points, errs := ParseLines(body, Millisecond, 0)
		lines := bytes.Count(body, []byte("\n")) + 1
		for _, e := range errs {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("error line %d outside 1..%d: %v", e.Line, lines, e)
			}
		}
		for _, p := range points {
			if p.Line < 1 || p.Line > lines || p.Metric == "" || p.Kind < series.Counter || p.Kind > series.State {
				t.Fatalf("bad point %+v", p)
			}
		}
		p := New(Config{Now: func() time.Time { return time.Unix(0, 0) }})
		p.applyPoints(points, body)
	})
}

// FuzzStatsdLine checks that any statsd packet parses without panicking and that what is
// accepted is well-formed and can be collected.
func FuzzStatsdLine(f *testing.F) {
	for _, s := range []string{
		"a:1|c", "a:1|c|@0.1", "a:-1|g", "a:+2|g", "a:1:2:3|ms|#k:v,f", "a:x|s", "a:1|h|T123|c:abc",
		"_e{1,1}:a|b", "a:1|c\nb:2|g\n\nbad", "a:1|c|#metric:1", "a:1e400|c",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, packet []byte) {
		var l StatsdLine
		for line := range bytes.SplitSeq(packet, []byte("\n")) {
			if ParseStatsdLine(line, &l) == nil {
				if l.Name == "" || len(l.Values) == 0 || !(l.Rate > 0 && l.Rate <= 1) {
					t.Fatalf("accepted %q as %+v", line, l)
				}
			}
		}
		p := New(Config{Now: func() time.Time { return time.Unix(0, 0) }})
		p.handleStatsd(packet, &l)
		s := p.Stats()
		rec := series.NewRecorder()
		if err := p.Collect(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		if s.StatsdLines > 0 && len(rec.Values) <= len(selfNames) {
			t.Fatalf("%d lines accepted but nothing collected", s.StatsdLines)
		}
	})
}
