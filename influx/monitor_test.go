package influx

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func sendAll(t *testing.T, mon *Monitor, input []byte, hist bool) {
	t.Helper()
	ms, err := parseLines(input)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ms {
		send := mon.Send
		if hist {
			send = mon.SendHistogrammable
		}
		if err := send(&ms[i]); err != nil {
			t.Fatalf("send %s: %v", ms[i].String(), err)
		}
	}
}

// TestAggregationGolden is the seed's example: six lines in, four out.
func TestAggregationGolden(t *testing.T) {
	input, err := os.ReadFile("testdata/aggregation.input")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/aggregation.golden")
	if err != nil {
		t.Fatal(err)
	}
	mon := mustNew(t, Config{})
	sendAll(t, mon, input, false)
	if got := mon.AppendLines(nil); !bytes.Equal(got, want) {
		t.Errorf("aggregated lines:\n%s\nwant:\n%s", got, want)
	}
	// Scrapes are non-destructive by default: the same again.
	if got := mon.AppendLines(nil); !bytes.Equal(got, want) {
		t.Errorf("second scrape:\n%s\nwant:\n%s", got, want)
	}
}

func TestAggregationTagOrderIndependent(t *testing.T) {
	mon := mustNew(t, Config{})
	for i, order := range [][]string{{"a", "b"}, {"b", "a"}} {
		m := NewMetric("m", time.Unix(10, int64(i)))
		for _, k := range order {
			m.AddTag(k, "v"+k)
		}
		m.SetFieldFloat64("f", 0.25)
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := string(mon.AppendLines(nil)), "m,a=va,b=vb f=0.5 10000000000\n"; got != want {
		t.Errorf("lines = %q; want %q (one bucket whatever the tag order)", got, want)
	}
}

func TestAggregationSums(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("m", time.Unix(3, 0))
	m.SetFieldInt64("i", math.MaxInt64)
	m.SetFieldUInt64("u", 5)
	m.SetFieldFloat64("f", 1e308)
	for range 2 {
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
	}
	// int64 wraps like Go arithmetic; a float sum beyond the range is clamped (line protocol
	// has no infinity).
	want := fmt.Sprintf("m i=%di,u=10u,f=1.7976931348623157e+308 3000000000\n", int64(-2))
	if got := string(mon.AppendLines(nil)); got != want {
		t.Errorf("lines = %q; want %q", got, want)
	}
}

func TestFieldTypeConflict(t *testing.T) {
	mon := mustNew(t, Config{})
	a := NewMetric("m", time.Unix(1, 0))
	a.SetFieldInt64("x", 1)
	if err := mon.Send(&a); err != nil {
		t.Fatal(err)
	}
	b := NewMetric("m", time.Unix(1, 0))
	b.SetFieldInt64("y", 1) // would be fine alone
	b.SetFieldFloat64("x", 1)
	if err := mon.Send(&b); !errors.Is(err, ErrFieldType) {
		t.Errorf("Send(conflicting type) = %v; want ErrFieldType", err)
	}
	if got, want := string(mon.AppendLines(nil)), "m x=1i 1000000000\n"; got != want {
		t.Errorf("lines = %q; want %q (a refused metric changes nothing)", got, want)
	}
	// Histogrammables take any mix of types.
	if err := mon.SendHistogrammable(&a); err != nil {
		t.Error(err)
	}
	if err := mon.SendHistogrammable(&b); err != nil {
		t.Errorf("SendHistogrammable(mixed types) = %v", err)
	}
}

// TestHistogrammableSeedExample is the seed's Send + SendHistogrammable example.
func TestHistogrammableSeedExample(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("measurement", time.Unix(1746457955, 123))
	m.AddTag("tag1", "val1")
	m.SetFieldUInt64("field1", 1)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	if err := mon.SendHistogrammable(&m); err != nil {
		t.Fatal(err)
	}
	want := "measurement,tag1=val1 field1=1u 1746457955000000000\n" +
		"measurement,tag1=val1 field1_mean=1,field1_median=1,field1_min=1,field1_p10=1,field1_p30=1,field1_p70=1,field1_p90=1,field1_max=1,field1_count=1,field1_poolsize=1 1746457955000000000\n"
	if got := string(mon.AppendLines(nil)); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

func TestHistogrammableStatistics(t *testing.T) {
	mon := mustNew(t, Config{Seed: 1})
	m := NewMetric("lat", time.Unix(7, 0))
	for i := 100; i >= 1; i-- {
		m.SetFieldInt64("d", int64(i))
		if err := mon.SendHistogrammable(&m); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := parseLines(mon.AppendLines(nil))
	if err != nil || len(ms) != 1 {
		t.Fatalf("parse: %v, %d lines", err, len(ms))
	}
	want := []struct {
		key string
		v   float64
	}{
		{"d_mean", 50.5}, {"d_median", 50.5}, {"d_min", 1}, {"d_p10", 10.9}, {"d_p30", 30.7},
		{"d_p70", 70.3}, {"d_p90", 90.1}, {"d_max", 100}, {"d_count", 100}, {"d_poolsize", 100},
	}
	fs := ms[0].Fields()
	if len(fs) != len(want) {
		t.Fatalf("fields %+v; want %d", fs, len(want))
	}
	for i, w := range want {
		if fs[i].Key != w.key || fs[i].Kind != Float || math.Abs(fs[i].Float()-w.v) > 1e-9 {
			t.Errorf("field %d = %s=%v (%s); want %s=%v (float)", i, fs[i].Key, fs[i].Float(), fs[i].Kind, w.key, w.v)
		}
	}
}

func TestReservoirBounded(t *testing.T) {
	mon := mustNew(t, Config{ReservoirSize: 10, Seed: 1})
	m := NewMetric("r", time.Unix(1, 0))
	for i := range 1000 {
		m.SetFieldFloat64("v", float64(i))
		if err := mon.SendHistogrammable(&m); err != nil {
			t.Fatal(err)
		}
	}
	out := string(mon.AppendLines(nil))
	for _, want := range []string{"v_count=1000,", "v_poolsize=10 ", "v_min=0,", "v_max=999,", "v_mean=499.5,"} {
		if !strings.Contains(out, want) {
			t.Errorf("lines %q lack %q (count counts every value; min, max and mean are exact)", out, want)
		}
	}
}

// TestReservoirUniform checks Algorithm R: every value of the stream ends in the reservoir
// with the same probability size/n.
func TestReservoirUniform(t *testing.T) {
	const size, n, trials = 5, 20, 4000
	hits := make([]int, n)
	mon := mustNew(t, Config{ReservoirSize: size, Seed: 42})
	for trial := range trials {
		m := NewMetric("u", time.Unix(int64(trial), 0)) // a fresh bucket per trial
		for i := range n {
			m.SetFieldFloat64("v", float64(i))
			if err := mon.SendHistogrammable(&m); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range mon.shards {
		for _, b := range mon.shards[i].buckets {
			for ; b != nil; b = b.next {
				for _, v := range b.fields[0].res {
					hits[int(v)]++
				}
			}
		}
	}
	// Expected trials·size/n = 1000 each; binomial sd ≈ 27, allow 5 sd.
	for i, h := range hits {
		if math.Abs(float64(h)-trials*size/n) > 5*math.Sqrt(trials*0.25*0.75) {
			t.Errorf("value %d kept %d times of %d; want ≈ %d", i, h, trials, trials*size/n)
		}
	}
}

func TestResetOnScrape(t *testing.T) {
	mon := mustNew(t, Config{ResetOnScrape: true})
	srv := mon // the HTTP handler applies the option; AppendLines never resets
	m := NewMetric("m", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	if got := string(mon.AppendLines(nil)); got != "m x=1i 1000000000\n" {
		t.Errorf("AppendLines = %q", got)
	}
	if got := scrape(t, srv); got != "m x=1i 1000000000\n" {
		t.Errorf("first scrape = %q", got)
	}
	if got := scrape(t, srv); got != "" {
		t.Errorf("second scrape = %q; want empty after reset", got)
	}
	if mon.Stats().Buckets != 0 {
		t.Errorf("Stats().Buckets = %d after reset; want 0", mon.Stats().Buckets)
	}
}

func TestRetention(t *testing.T) {
	mon := mustNew(t, Config{Retention: 300 * time.Millisecond})
	m := NewMetric("m", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	if got := string(mon.AppendLines(nil)); got == "" {
		t.Fatal("bucket gone before its retention")
	}
	time.Sleep(800 * time.Millisecond)
	if got := string(mon.AppendLines(nil)); got != "" {
		t.Errorf("lines after retention = %q; want none", got)
	}
	if n := mon.Stats().Buckets; n != 0 {
		t.Errorf("Stats().Buckets = %d; want 0", n)
	}
	// A recycled bucket starts clean.
	m.SetFieldInt64("y", 2)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	if got, want := string(mon.AppendLines(nil)), "m x=1i,y=2i 1000000000\n"; got != want {
		t.Errorf("lines = %q; want %q", got, want)
	}
}

func TestMaxBucketsDropsAreCounted(t *testing.T) {
	mon := mustNew(t, Config{MaxBuckets: 2})
	for i := range 3 {
		m := NewMetric(fmt.Sprintf("m%d", i), time.Unix(1, 0))
		m.SetFieldInt64("x", 1)
		err := mon.Send(&m)
		if i < 2 && err != nil {
			t.Fatal(err)
		}
		if i == 2 && !errors.Is(err, ErrDropped) {
			t.Errorf("third bucket: Send = %v; want ErrDropped", err)
		}
	}
	if st := mon.Stats(); st.Dropped != 1 || st.Buckets != 2 {
		t.Errorf("Stats() = %+v; want 1 dropped, 2 buckets", st)
	}
	out := string(mon.AppendLines(nil))
	if !strings.Contains(out, SelfMeasurement+" buckets=2i,dropped=1u,push_failures=0u ") {
		t.Errorf("lines %q lack the drop count", out)
	}
	if _, err := parseLines([]byte(out)); err != nil {
		t.Errorf("output does not parse: %v", err)
	}
}

func TestZeroTimestampIsNow(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("m", time.Time{})
	m.SetFieldInt64("x", 1)
	before := time.Now().Unix()
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Unix()
	ms, err := parseLines(mon.AppendLines(nil))
	if err != nil || len(ms) != 1 {
		t.Fatalf("parse: %v, %d lines", err, len(ms))
	}
	if s := ms[0].Timestamp().Unix(); s < before || s > after || ms[0].Timestamp().Nanosecond() != 0 {
		t.Errorf("timestamp = %v; want the current second", ms[0].Timestamp())
	}
}

func TestConcurrentSend(t *testing.T) {
	const goroutines, n = 8, 3000
	mon := mustNew(t, Config{ReservoirSize: 50})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			shared := NewMetric("shared", time.Unix(100, 0))
			shared.AddTag("k", "v")
			own := NewMetric("own", time.Unix(100, 0))
			own.AddTag("g", fmt.Sprint(g))
			for i := range n {
				shared.SetFieldInt64("n", 1)
				own.SetFieldUInt64("n", 2)
				if err := mon.Send(&shared); err != nil {
					t.Error(err)
					return
				}
				if err := mon.Send(&own); err != nil {
					t.Error(err)
					return
				}
				shared.SetFieldFloat64("n", float64(i))
				if err := mon.SendHistogrammable(&shared); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if _, err := parseLines(mon.AppendLines(nil)); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	ms, err := parseLines(mon.AppendLines(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2+goroutines {
		t.Fatalf("%d lines; want %d", len(ms), 2+goroutines)
	}
	for _, m := range ms {
		switch {
		case m.Measurement() == "own":
			if f := m.Fields()[0]; f.Uint() != 2*n {
				t.Errorf("own %v: n = %d; want %d", m.Tags(), f.Uint(), 2*n)
			}
		case m.Fields()[0].Key == "n":
			if f := m.Fields()[0]; f.Int() != goroutines*n {
				t.Errorf("shared n = %d; want %d", f.Int(), goroutines*n)
			}
		default:
			for _, f := range m.Fields() {
				switch f.Key {
				case "n_count":
					if f.Float() != goroutines*n {
						t.Errorf("n_count = %v; want %d", f.Float(), goroutines*n)
					}
				case "n_poolsize":
					if f.Float() != 50 {
						t.Errorf("n_poolsize = %v; want 50", f.Float())
					}
				}
			}
		}
	}
}
