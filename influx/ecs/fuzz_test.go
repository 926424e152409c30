package ecs

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// FuzzFormat builds a metric from arbitrary names and values. Format either writes one line
// that the reference decoder reads back as that metric, or writes nothing and fails; summing
// the metric twice doubles it; its histogram line encodes whenever the metric does.
func FuzzFormat(f *testing.F) {
	f.Add("m", "k", "v", "k2", "v2", "f", int64(1), uint64(2), 1.5, int64(0))
	f.Add("", "b", "", "a", "v", "f", int64(-1), uint64(0), math.Inf(1), int64(-1))
	f.Add("a b,c", "k=", "v\\", "k=", "x", "f\n", int64(math.MaxInt64), uint64(math.MaxUint64), math.NaN(), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, name, tk1, tv1, tk2, tv2, fk string, iv int64, uv uint64, fv float64, ts int64) {
		m := NewMetric(name, time.Unix(0, ts))
		if tk1 != "" {
			m.AddTag(tk1, tv1)
		}
		if tk2 != "" {
			m.AddTag(tk2, tv2)
		}
		m.SetFieldInt64(fk, iv)
		m.SetFieldUInt64(fk+"_u", uv)
		m.SetFieldFloat64(fk+"_f", fv)
		var buf bytes.Buffer
		err := Format(&buf, []Metric{m})
		if err != nil {
			if buf.Len() != 0 {
				t.Fatalf("Format failed (%v) but wrote %q", err, buf.Bytes())
			}
			return
		}
		ls, derr := decode(buf.Bytes())
		if derr != nil || len(ls) != 1 {
			t.Fatalf("Format wrote %q: %d lines, %v", buf.Bytes(), len(ls), derr)
		}
		l := ls[0]
		var tags [][2]string
		for _, tg := range m.tags {
			tags = append(tags, [2]string{tg.name, tg.value})
		}
		wantTS := time.Unix(0, ts).UnixNano()
		if l.name != name || !slices.Equal(l.tags, tags) || l.ts != wantTS {
			t.Fatalf("round trip of %+v: %+v", m, l)
		}
		if l.fields[fk] != strconv.FormatInt(iv, 10)+"i" || l.fields[fk+"_u"] != strconv.FormatUint(uv, 10)+"u" {
			t.Fatalf("round trip fields %v", l.fields)
		}
		if got, _ := strconv.ParseFloat(l.fields[fk+"_f"], 64); got != fv {
			t.Fatalf("float %v came back %v", fv, got)
		}

		agg := NewMetricsAggregate()
		agg.AddMetric(&m)
		agg.AddMetric(&m)
		ms := agg.GetMetrics()
		if len(ms) != 1 {
			t.Fatalf("two sends of one metric: %d buckets", len(ms))
		}
		fs := ms[0].GetFields()
		if fs[fk] != iv*2 || fs[fk+"_u"] != uv*2 {
			t.Fatalf("sums %v; want %d, %d", fs, iv*2, uv*2)
		}
		if want := max(min(fv*2, math.MaxFloat64), -math.MaxFloat64); fs[fk+"_f"] != want {
			t.Fatalf("float sum %v; want %v", fs[fk+"_f"], want)
		}

		h := NewMetricsReservoirSampling()
		h.AddMetric(&m)
		buf.Reset()
		if err := Format(&buf, h.GetMetrics()); err != nil {
			t.Fatalf("histogram of an encodable metric: %v", err)
		}
		if ls, err := decode(buf.Bytes()); err != nil || len(ls) != 3 {
			t.Fatalf("histogram lines %q: %d, %v", buf.Bytes(), len(ls), err)
		}
	})
}

// FuzzScrapeLines sends arbitrary line protocol, read by the reference decoder with its tags
// in the order written, through both containers as a scrape does. A scrape that encodes must
// read back, and summing the summed lines again must give the same lines.
func FuzzScrapeLines(f *testing.F) {
	f.Add([]byte("kafka,subsystem=ECS,topic=aliecs.run send_bytes=1638400u,sent_messages=42u 1746457955000000000\n"))
	f.Add([]byte("m,b=2,a=1 f=1.5,i=-3i,u=7u 0\nm,a=1,b=2 f=2.5 999999999\n"))
	f.Add([]byte("aggregated,tag1=val1 fields1=1i 1000000001\naggregated,tag1=val1 fields1=1i,fields2=1i 1000000021\n"))
	f.Add([]byte("m x=1i\nm x=1.0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, ok := metricsOf(data)
		if !ok {
			return
		}
		agg, hist := NewMetricsAggregate(), NewMetricsReservoirSampling()
		for i := range ms {
			agg.AddMetric(&ms[i])
			hist.AddMetric(&ms[i])
		}
		var out bytes.Buffer
		if err := Format(&out, agg.GetMetrics()); err != nil {
			if out.Len() != 0 {
				t.Fatalf("Format failed (%v) but wrote %q", err, out.Bytes())
			}
			return
		}
		back, ok := metricsOf(out.Bytes())
		if !ok {
			t.Fatalf("scrape does not read back: %q", out.Bytes())
		}
		again := NewMetricsAggregate()
		for i := range back {
			again.AddMetric(&back[i])
		}
		var out2 bytes.Buffer
		if err := Format(&out2, again.GetMetrics()); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("summing the sums changed them (%v):\n%s\nvs\n%s", err, out.Bytes(), out2.Bytes())
		}
		var hout bytes.Buffer
		if err := Format(&hout, hist.GetMetrics()); err != nil {
			t.Fatalf("histograms of encodable metrics: %v", err)
		}
		if _, err := decode(hout.Bytes()); err != nil {
			t.Fatalf("histogram scrape does not read back: %v\n%s", err, hout.Bytes())
		}
	})
}

// metricsOf decodes line protocol into Metrics, keeping the tags in their order; ok is false
// for input the decoder refuses or this package cannot send (strings, booleans, NaN).
func metricsOf(data []byte) (ms []Metric, ok bool) {
	dec := lineprotocol.NewDecoderWithBytes(data)
	for dec.Next() {
		name, err := dec.Measurement()
		if err != nil {
			return nil, false
		}
		m := NewDefaultMetric(string(name), time.Time{})
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				return nil, false
			}
			if k == nil {
				break
			}
			m.AddTag(string(k), string(v))
		}
		for {
			k, v, err := dec.NextField()
			if err != nil {
				return nil, false
			}
			if k == nil {
				break
			}
			switch v.Kind() {
			case lineprotocol.Int:
				m.SetFieldInt64(string(k), v.IntV())
			case lineprotocol.Uint:
				m.SetFieldUInt64(string(k), v.UintV())
			case lineprotocol.Float:
				m.SetFieldFloat64(string(k), v.FloatV())
			default:
				return nil, false
			}
		}
		ts, err := dec.Time(lineprotocol.Nanosecond, time.Unix(1, 0))
		if err != nil {
			return nil, false
		}
		m.timestamp = ts
		ms = append(ms, m)
	}
	return ms, dec.Err() == nil
}
