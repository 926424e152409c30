package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// FuzzParseLines checks that any /write body parses without panicking, that every line is
// either kept or reported, that reading the body as it arrives (a byte at a time) splits it into
// the same lines as reading it whole, and that the body goes through a Push's /write handler
// within the Push's limits (see checkPush).
func FuzzParseLines(f *testing.F) {
	if b, err := os.ReadFile("testdata/write.lp"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"m v=1", "m,a=b v=1i,w=2u,x=true,y=\"s\" 1", "bad v=\nok v=1", "# c\n\n m v=1 1\r\n",
		"m s=\"a\nb\" 1\nn v=1", "m,metric=x v=1", `m\ ,a\=b=c\,d e\ f=1`, "m v=1 99999999999999999999",
		"m,source=push v=1", "m,source=other v=1", "m,a=1,b=2,c=3,d=4 v=1", "m,k=" + strings.Repeat("v", 40) + " v=1",
		"m s=\"" + strings.Repeat("x", 40) + "\"", "#" + strings.Repeat("c", 100) + "\nm v=1",
		"m v=1\n" + strings.Repeat("l", 100) + " v=1\nm v=2",
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
			if len(e.Error()) > 400 {
				t.Fatalf("error of %d bytes: %.100q...", len(e.Error()), e.Error())
			}
		}
		for _, p := range points {
			if p.Line < 1 || p.Line > lines || p.Metric == "" || p.Kind < series.Counter || p.Kind > series.State {
				t.Fatalf("bad point %+v", p)
			}
		}
		checkStreamSplit(t, body)
		p := New(Config{Now: func() time.Time { return time.Unix(0, 0) }, MaxLabelNameBytes: 8, MaxLabelValueBytes: 24,
			MaxLabels: 4, MaxSeries: 6, MaxBytes: 2000, MaxRequestLines: 8, MaxRequestNewSeries: 5})
		w := post(t, p.WriteHandler(), "?precision=ms", body, nil)
		if w.Code != 204 && w.Code != 400 && w.Code != 413 {
			t.Fatalf("POST = %d %s", w.Code, w.Body)
		}
		checkPush(t, p)
	})
}

// checkStreamSplit checks that an entryReader reading body a byte at a time, with no line too
// long, returns the entries that splitEntry finds in the whole body, on the same lines.
func checkStreamSplit(t *testing.T, body []byte) {
	t.Helper()
	type ent struct {
		text string
		line int
	}
	var whole []ent
	line := 1
	for b := body; len(b) > 0; {
		adv, e, before, after, _ := splitEntry(b, true)
		b = b[adv:]
		line += before
		if e != nil {
			whole = append(whole, ent{string(e), line})
		}
		line += after
	}
	var rd entryReader
	rd.reset(iotest.OneByteReader(bytes.NewReader(body)), len(body)+1)
	for i := 0; ; i++ {
		e, line, st := rd.next()
		if st != entryOK {
			if st != entryEOF || i != len(whole) {
				t.Fatalf("streaming: status %d after %d entries; want the end after %d", st, i, len(whole))
			}
			return
		}
		if i >= len(whole) || string(e) != whole[i].text || line != whole[i].line {
			t.Fatalf("streaming entry %d = %q on line %d; whole body: %v", i, e, line, whole)
		}
	}
}

// checkPush checks what a Push holds against its limits: every series is labelled
// source="push" and within the label limits, the series and bytes held are within the budgets
// and add up.
func checkPush(t *testing.T, p *Push) {
	t.Helper()
	p.mu.Lock()
	n, b := 0, int64(0)
	for _, e := range p.entries {
		if e.labels[SourceLabel] != SourceValue || e.labels["metric"] == "" {
			t.Fatalf("pushed series labelled %v", e.labels)
		}
		if len(e.labels) > p.cfg.MaxLabels {
			t.Fatalf("pushed series with %d labels (limit %d)", len(e.labels), p.cfg.MaxLabels)
		}
		for k, v := range e.labels {
			if len(k) > p.cfg.MaxLabelNameBytes || len(v) > p.cfg.MaxLabelValueBytes {
				t.Fatalf("label %q=%q over the limits", k, v)
			}
		}
		if len(e.text) > p.cfg.MaxLabelValueBytes {
			t.Fatalf("string of %d bytes held", len(e.text))
		}
		n += e.nseries
		b += e.cost
	}
	if n != p.nseries || b != p.bytes || n > p.cfg.MaxSeries || b > p.cfg.MaxBytes {
		t.Fatalf("%d series, %d bytes held; counted %d, %d; limits %d, %d", n, b, p.nseries, p.bytes, p.cfg.MaxSeries, p.cfg.MaxBytes)
	}
	p.mu.Unlock()
	rec := series.NewRecorder()
	if err := p.Collect(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	for k, ref := range rec.Refs() {
		if !strings.HasPrefix(ref.Labels["metric"], "ingest.") && ref.Labels[SourceLabel] != SourceValue {
			t.Fatalf("collected %s without the source label", k)
		}
	}
}

// FuzzWriteBody sends any body, gzip-compressed or not, to /write with small limits: the answer
// is 204, 400 or 413, its error text is bounded whatever the input, and the Push stays within
// its limits.
func FuzzWriteBody(f *testing.F) {
	f.Add([]byte("m v=1\nm v=2"), false)
	f.Add([]byte(strings.Repeat("m v=1\n", 50)), true)
	f.Add([]byte("m,t="+strings.Repeat("x", 300)+" v=1"), true)
	f.Add([]byte("m s=\"a\nb\"\n"+strings.Repeat("#", 300)), false)
	f.Fuzz(func(t *testing.T, body []byte, gz bool) {
		p := New(Config{Now: func() time.Time { return time.Unix(0, 0) }, MaxBodyBytes: 256, MaxLabelValueBytes: 16,
			MaxSeries: 10, MaxBytes: 3000, MaxRequestLines: 10, MaxRequestNewSeries: 8})
		var hdr map[string]string
		if gz {
			var zb bytes.Buffer
			zw := gzip.NewWriter(&zb)
			zw.Write(body)
			zw.Close()
			body, hdr = zb.Bytes(), map[string]string{"Content-Encoding": "gzip"}
		}
		w := post(t, p.WriteHandler(), "", body, hdr)
		switch w.Code {
		case http.StatusNoContent:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var ans struct {
				Error string
				Lines []int
			}
			if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
				t.Fatalf("answer %d %q: %v", w.Code, w.Body, err)
			}
			if len(ans.Error) > maxListedErrors*400+100 || len(ans.Lines) > maxListedLines {
				t.Fatalf("answer of %d bytes, %d lines", len(ans.Error), len(ans.Lines))
			}
		default:
			t.Fatalf("POST = %d %s", w.Code, w.Body)
		}
		checkPush(t, p)
	})
}

// FuzzStatsdLine checks that any statsd packet parses without panicking, that what is
// accepted is well-formed and can be collected, and that the Push stays within its limits.
func FuzzStatsdLine(f *testing.F) {
	for _, s := range []string{
		"a:1|c", "a:1|c|@0.1", "a:-1|g", "a:+2|g", "a:1:2:3|ms|#k:v,f", "a:x|s", "a:1|h|T123|c:abc",
		"_e{1,1}:a|b", "a:1|c\nb:2|g\n\nbad", "a:1|c|#metric:1", "a:1e400|c",
		"a:1|c|#source:push", "a:1|c|#source:x", "a:1|ms|#a,b,c,d,e", "a:1|g|#k:" + strings.Repeat("v", 40),
		strings.Repeat("n", 40) + ":1|ms", "a:1|ms\nb:1|ms\nc:1|ms\nd:1|ms", "s:a:b:c:d:e:f:g|s",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, packet []byte) {
		var l StatsdLine
		for line := range bytes.SplitSeq(packet, []byte("\n")) {
			err := ParseStatsdLine(line, &l)
			if err == nil {
				if l.Name == "" || len(l.Values) == 0 || !(l.Rate > 0 && l.Rate <= 1) {
					t.Fatalf("accepted %q as %+v", line, l)
				}
			} else if len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes: %.100q...", len(err.Error()), err.Error())
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
		for _, probs := range rec.Problems {
			for _, pr := range probs {
				if len(pr) > 400 {
					t.Fatalf("problem of %d bytes: %.100q...", len(pr), pr)
				}
			}
		}
		small := New(Config{Now: func() time.Time { return time.Unix(0, 0) }, MaxLabelNameBytes: 8, MaxLabelValueBytes: 24,
			MaxLabels: 4, MaxSeries: 12, MaxBytes: 3000, MaxTimerSamples: 64, MaxSetSize: 40})
		small.handleStatsd(packet, &l)
		checkPush(t, small)
	})
}
