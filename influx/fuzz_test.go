package influx

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzSendLines feeds arbitrary line protocol, decoded by the reference decoder, to Send and
// SendHistogrammable. Whatever is accepted must come out as line protocol the decoder reads
// back, with one line per (measurement, tags, second, kind), and sending the summed output
// again into a fresh Monitor must reproduce it.
func FuzzSendLines(f *testing.F) {
	if b, err := os.ReadFile("testdata/aggregation.input"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("kafka,subsystem=ECS,topic=aliecs.run send_bytes=1638400u,sent_messages=42u 1746457955000000000\n"))
	f.Add([]byte("m,b=2,a=1 f=1.5,i=-3i,u=7u 0\nm,a=1,b=2 f=2.5 999999999\n"))
	f.Add([]byte("m x=1i\nm x=1.0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := parseLines(data)
		if err != nil {
			return
		}
		for i := range ms {
			if ms[i].Timestamp().IsZero() {
				ms[i].SetTimestamp(time.Unix(1, 0)) // keep the test independent of the clock
			}
		}
		mon := mustNew(t, Config{ReservoirSize: 4, Seed: 1})
		hist := mustNew(t, Config{ReservoirSize: 4, Seed: 1})
		ecs := mustNew(t, Config{ReservoirSize: 4, Seed: 1, Statistics: StatisticsECS})
		for i := range ms {
			mon.Send(&ms[i])
			hist.SendHistogrammable(&ms[i])
			ecs.SendHistogrammable(&ms[i])
		}
		out := mon.AppendLines(nil)
		back, err := parseLines(out)
		if err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, out)
		}
		hs, err := parseLines(hist.AppendLines(nil))
		if err != nil {
			t.Fatalf("histogram output does not parse: %v", err)
		}
		es, err := parseLines(ecs.AppendLines(nil))
		if err != nil {
			t.Fatalf("StatisticsECS output does not parse: %v", err)
		}
		if len(es) != len(hs) {
			t.Fatalf("StatisticsECS: %d lines; default: %d", len(es), len(hs))
		}
		for i := range es { // same buckets, same fields; counts unsigned
			ef, hf := es[i].Fields(), hs[i].Fields()
			if len(ef) != len(hf) {
				t.Fatalf("line %d: %d fields vs %d", i, len(ef), len(hf))
			}
			for j := range ef {
				isCount := strings.HasSuffix(ef[j].Key, "_count") || strings.HasSuffix(ef[j].Key, "_poolsize")
				if ef[j].Key != hf[j].Key || (ef[j].Kind == Uint) != isCount || ef[j].Float() != hf[j].Float() && isCount {
					t.Fatalf("line %d field %d: %s=%v (%s) vs %s=%v (%s)", i, j, ef[j].Key, ef[j].Float(), ef[j].Kind, hf[j].Key, hf[j].Float(), hf[j].Kind)
				}
			}
		}
		again := mustNew(t, Config{})
		for i := range back {
			if err := again.Send(&back[i]); err != nil {
				t.Fatalf("re-sending %s: %v", back[i].String(), err)
			}
		}
		if out2 := again.AppendLines(nil); !bytes.Equal(out, out2) {
			t.Fatalf("aggregating the aggregate changed it:\n%s\nvs\n%s", out, out2)
		}
	})
}

// FuzzMetric builds metrics from arbitrary names and values: Send must accept exactly what
// AppendLine can encode, and never panic.
func FuzzMetric(f *testing.F) {
	f.Add("m", "k", "v", "f", int64(1), 1.5, int64(0))
	f.Add("", "k", "", "f", int64(-1), math.Inf(1), int64(-1))
	f.Add("a b,c", "k=", "v\\", "f\n", int64(math.MaxInt64), math.NaN(), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, name, tk, tv, fk string, iv int64, fv float64, ts int64) {
		m := NewMetric(name, time.Unix(0, ts))
		if tk != "" {
			m.AddTag(tk, tv)
		}
		m.SetFieldInt64(fk, iv)
		m.SetFieldFloat64(fk+"_f", fv)
		line, encErr := m.AppendLine(nil)
		mon := mustNew(t, Config{})
		sendErr := mon.Send(&m)
		if (encErr == nil) != (sendErr == nil) {
			t.Fatalf("AppendLine error %v but Send error %v", encErr, sendErr)
		}
		if encErr != nil {
			return
		}
		back, err := parseLines(line)
		if err != nil || len(back) != 1 {
			t.Fatalf("line %q does not decode: %v", line, err)
		}
		if got := back[0].String() + "\n"; got != string(line) {
			t.Fatalf("round trip: %q vs %q", got, line)
		}
		if out, err := parseLines(mon.AppendLines(nil)); err != nil || len(out) != 1 {
			t.Fatalf("scrape after sending %q: %d lines, %v", line, len(out), err)
		}
	})
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"8088/ecsmetrics", "127.0.0.1:8088/x", "[::1]:80/", "70000/x", "", "a:b:c/d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, path, err := ParseEndpoint(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(path, "/") || addr == "" {
			t.Fatalf("ParseEndpoint(%q) = %q, %q", s, addr, path)
		}
	})
}
