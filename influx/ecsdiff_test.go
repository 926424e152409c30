package influx

// The tests TestDefault_* check the influx column of the package documentation's table of
// differences from ECS, one test per row (the influx/ecs column is checked by the TestECS_*
// tests of that package).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Compile-time: Send and SendHistogrammable report errors.
var (
	_ func(*Monitor, *Metric) error = (*Monitor).Send
	_ func(*Monitor, *Metric) error = (*Monitor).SendHistogrammable
)

func TestDefault_API(t *testing.T) {
	m := NewMetric("m", time.Unix(1, 0))
	if len(m.Tags()) != 0 {
		t.Errorf("NewMetric added tags %v (ECS's one-argument NewMetric adds subsystem=ECS)", m.Tags())
	}
}

// histLine sends values as field a of one histogrammable metric and returns the scrape.
func histLine(t *testing.T, cfg Config, values ...float64) string {
	t.Helper()
	mon := mustNew(t, cfg)
	m := NewMetric("lat", time.Unix(100, 0))
	for _, v := range values {
		m.SetFieldFloat64("a", v)
		if err := mon.SendHistogrammable(&m); err != nil {
			t.Fatal(err)
		}
	}
	return string(mon.AppendLines(nil))
}

func oneToTen() []float64 {
	v := make([]float64, 10)
	for i := range v {
		v[i] = float64(10 - i)
	}
	return v
}

func TestDefault_Percentiles(t *testing.T) {
	got := histLine(t, Config{}, oneToTen()...)
	want := "lat a_mean=5.5,a_median=5.5,a_min=1,a_p10=1.9,a_p30=3.6999999999999997,a_p70=7.3,a_p90=9.1,a_max=10,a_count=10,a_poolsize=10 100000000000\n"
	if got != want {
		t.Errorf("default:\n got %q\nwant %q", got, want)
	}
	got = histLine(t, Config{Statistics: StatisticsECS}, oneToTen()...)
	want = "lat a_mean=5.5,a_median=6,a_min=1,a_p10=2,a_p30=4,a_p70=8,a_p90=10,a_max=10,a_count=10u,a_poolsize=10u 100000000000\n"
	if got != want {
		t.Errorf("StatisticsECS:\n got %q\nwant %q", got, want)
	}
	if _, err := New(Config{Statistics: StatisticsECS + 1}); err == nil {
		t.Error("New accepted an unknown Statistics")
	}
}

func TestDefault_MeanMinMax(t *testing.T) {
	for _, st := range []Statistics{StatisticsDefault, StatisticsECS} {
		mon := mustNew(t, Config{ReservoirSize: 10, Seed: 3, Statistics: st})
		m := NewMetric("r", time.Unix(1, 0))
		for i := range 1000 {
			m.SetFieldFloat64("v", float64(i))
			if err := mon.SendHistogrammable(&m); err != nil {
				t.Fatal(err)
			}
		}
		var res []float64
		for i := range mon.shards {
			for _, b := range mon.shards[i].buckets {
				res = slices.Clone(b.fields[0].res)
			}
		}
		slices.Sort(res)
		var sum float64
		for _, v := range res {
			sum += v
		}
		ms, err := parseLines(mon.AppendLines(nil))
		if err != nil || len(ms) != 1 {
			t.Fatalf("parse: %v", err)
		}
		got := map[string]float64{}
		for _, f := range ms[0].Fields() {
			got[f.Key] = f.Float()
		}
		want := map[string]float64{"v_min": 0, "v_max": 999, "v_mean": 499.5} // every value
		if st == StatisticsECS {
			want = map[string]float64{"v_min": res[0], "v_max": res[len(res)-1], "v_mean": sum / float64(len(res))}
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("Statistics %d: %s = %v; want %v", st, k, got[k], w)
			}
		}
	}
}

func TestDefault_CountIsFloat(t *testing.T) {
	for st, want := range map[Statistics][]string{
		StatisticsDefault: {"a_count=10,", "a_poolsize=10 "},
		StatisticsECS:     {"a_count=10u,", "a_poolsize=10u "},
	} {
		got := histLine(t, Config{Statistics: st}, oneToTen()...)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("Statistics %d: %q lacks %q", st, got, w)
			}
		}
	}
}

func TestDefault_OneLineForAllHistogramFields(t *testing.T) {
	for _, st := range []Statistics{StatisticsDefault, StatisticsECS} {
		mon := mustNew(t, Config{Statistics: st})
		for _, sec := range []int64{10, 15} {
			m := NewMetric("test", time.Unix(sec, 0))
			m.SetFieldInt64("val1", 1)
			m.SetFieldInt64("val2", 2)
			if err := mon.SendHistogrammable(&m); err != nil {
				t.Fatal(err)
			}
		}
		ms, err := parseLines(mon.AppendLines(nil))
		if err != nil || len(ms) != 2 || len(ms[0].Fields()) != 20 {
			t.Errorf("Statistics %d: %d lines (%v); want 2 of 20 fields (ECS: 4 of 10)", st, len(ms), err)
		}
	}
}

func TestDefault_EmptySendRefused(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("test", time.Unix(1, 0))
	if err := mon.Send(&m); !errors.Is(err, ErrInvalidMetric) {
		t.Errorf("Send(no fields) = %v; want ErrInvalidMetric", err)
	}
	if err := mon.SendHistogrammable(&m); !errors.Is(err, ErrInvalidMetric) {
		t.Errorf("SendHistogrammable(no fields) = %v; want ErrInvalidMetric", err)
	}
	if st := mon.Stats(); st.Buckets != 0 {
		t.Errorf("%d buckets; want 0", st.Buckets)
	}
}

func TestDefault_TagOrder(t *testing.T) {
	mon := mustNew(t, Config{})
	ba := NewMetric("m", time.Unix(1, 0))
	ba.AddTag("b", "2")
	ba.AddTag("a", "0")
	ba.AddTag("a", "1") // replaces
	ba.SetFieldInt64("x", 1)
	ab := NewMetric("m", time.Unix(1, 0))
	ab.AddTag("a", "1")
	ab.AddTag("b", "2")
	ab.SetFieldInt64("x", 1)
	for _, m := range []*Metric{&ba, &ab} {
		if err := mon.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := string(mon.AppendLines(nil)), "m,a=1,b=2 x=2i 1000000000\n"; got != want {
		t.Errorf("lines %q; want %q", got, want)
	}
}

// A metric that cannot be written is refused at Send; the scrape keeps everything else.
func TestDefault_UnwritableLineRefusedAtSend(t *testing.T) {
	mon := mustNew(t, Config{})
	good := NewMetric("good", time.Unix(1, 0))
	good.SetFieldInt64("x", 1)
	if err := mon.Send(&good); err != nil {
		t.Fatal(err)
	}
	badName := NewMetric("bad\n", time.Unix(1, 0))
	badName.SetFieldInt64("x", 1)
	badTag := NewMetric("bad", time.Unix(1, 0))
	badTag.AddTag("k", "trailing\\")
	badTag.SetFieldInt64("x", 1)
	badField := NewMetric("bad", time.Unix(1, 0))
	badField.SetFieldInt64("", 1)
	for _, m := range []*Metric{&badName, &badTag, &badField} {
		if err := mon.Send(m); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("Send(%q) = %v; want ErrInvalidMetric", m.Measurement(), err)
		}
	}
	if got, want := string(mon.AppendLines(nil)), "good x=1i 1000000000\n"; got != want {
		t.Errorf("lines %q; want %q", got, want)
	}
}

func TestDefault_NonFiniteRefused(t *testing.T) {
	mon := mustNew(t, Config{})
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		m := NewMetric("m", time.Unix(1, 0))
		m.SetFieldFloat64("f", v)
		if err := mon.Send(&m); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("Send(%v) = %v; want ErrInvalidMetric", v, err)
		}
		if err := mon.SendHistogrammable(&m); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("SendHistogrammable(%v) = %v; want ErrInvalidMetric", v, err)
		}
	}
}

func TestDefault_FloatSumClamped(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("m", time.Unix(3, 0))
	m.SetFieldFloat64("f", -math.MaxFloat64)
	for range 2 {
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
		if err := mon.SendHistogrammable(&m); err != nil {
			t.Fatal(err)
		}
	}
	out := string(mon.AppendLines(nil))
	for _, want := range []string{"m f=-1.7976931348623157e+308 ", "f_mean=-1.7976931348623157e+308,"} {
		if !strings.Contains(out, want) {
			t.Errorf("lines %q lack %q", out, want)
		}
	}
}

func TestDefault_FieldChangesTypeRefused(t *testing.T) {
	mon := mustNew(t, Config{})
	a := NewMetric("m", time.Unix(1, 0))
	a.SetFieldUInt64("x", 1)
	b := NewMetric("m", time.Unix(1, 0))
	b.SetFieldInt64("x", 1)
	if err := mon.Send(&a); err != nil {
		t.Fatal(err)
	}
	if err := mon.Send(&b); !errors.Is(err, ErrFieldType) {
		t.Errorf("Send(int after uint) = %v; want ErrFieldType", err)
	}
}

// Synchronous aggregation drops nothing, whatever the rate; beyond MaxBuckets a new bucket
// is refused, counted and reported.
func TestDefault_UnderLoadNeverDrops(t *testing.T) {
	mon := mustNew(t, Config{MaxBuckets: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const goroutines, n = 8, 50000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			m := NewMetric("tight", time.Unix(1, 0))
			m.SetFieldInt64("n", 1)
			for range n {
				if err := mon.Send(&m); err != nil {
					t.Error(err)
					return
				}
				if err := mon.SendHistogrammable(&m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	out := string(mon.AppendLines(nil))
	for _, want := range []string{fmt.Sprintf("tight n=%di ", goroutines*n), fmt.Sprintf("n_count=%d,", goroutines*n)} {
		if !strings.Contains(out, want) {
			t.Errorf("lines %q lack %q", out, want)
		}
	}
	for i := range 2 {
		m := NewMetric("more", time.Unix(int64(10+i), 0))
		m.SetFieldInt64("x", 1)
		err := mon.Send(&m)
		if i == 1 && !errors.Is(err, ErrDropped) {
			t.Errorf("the fourth bucket: %v; want ErrDropped", err)
		}
	}
	if out := string(mon.AppendLines(nil)); !strings.Contains(out, SelfMeasurement+" buckets=3i,dropped=1u,") {
		t.Errorf("lines %q lack the drop count", out)
	}
}

func TestDefault_MetricReusedAfterSend(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("r", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	for range 3 {
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
	}
	m.SetFieldInt64("x", 100)
	m.AddTag("late", "tag")
	if got, want := string(mon.AppendLines(nil)), "r x=3i 1000000000\n"; got != want {
		t.Errorf("lines %q; want %q", got, want)
	}
}

func TestDefault_ZeroTimestamp(t *testing.T) {
	mon := mustNew(t, Config{})
	m := NewMetric("z", time.Time{})
	m.SetFieldInt64("x", 1)
	before := time.Now().Unix()
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	out := string(mon.AppendLines(nil))
	if !strings.HasPrefix(out, "z x=1i ") || strings.Contains(out, fmt.Sprintf(" %d000000000", before-1)) {
		t.Errorf("lines %q; want the current second", out)
	}
}

func TestDefault_ScrapesNonDestructive(t *testing.T) {
	for _, reset := range []bool{false, true} {
		mon := mustNew(t, Config{ResetOnScrape: reset})
		m := NewMetric("m", time.Unix(1, 0))
		m.SetFieldInt64("x", 1)
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
		first, second := scrape(t, mon), scrape(t, mon)
		if first != "m x=1i 1000000000\n" || (second == first) == reset {
			t.Errorf("ResetOnScrape=%v: scrapes %q then %q", reset, first, second)
		}
	}
}

func TestDefault_MemoryBounded(t *testing.T) {
	mon := mustNew(t, Config{Retention: 20 * time.Millisecond})
	m := NewMetric("m", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	if err := mon.Send(&m); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond)
	if out := mon.AppendLines(nil); len(out) != 0 {
		t.Errorf("after Retention: %q; want nothing", out)
	}
	if st := mon.Stats(); st.Buckets != 0 {
		t.Errorf("%d buckets kept", st.Buckets)
	}
}

func TestDefault_FieldAndLineOrder(t *testing.T) {
	mon := mustNew(t, Config{})
	for _, l := range []struct {
		name string
		sec  int64
		keys []string
	}{{"late", 2, []string{"z", "a"}}, {"early", 1, []string{"y", "b"}}, {"late", 2, []string{"c", "z"}}, {"second", 1, []string{"k"}}} {
		m := NewMetric(l.name, time.Unix(l.sec, 0))
		for _, k := range l.keys {
			m.SetFieldInt64(k, 1)
		}
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
	}
	want := "early y=1i,b=1i 1000000000\nsecond k=1i 1000000000\nlate z=2i,a=1i,c=1i 2000000000\n"
	for range 3 {
		if got := string(mon.AppendLines(nil)); got != want {
			t.Errorf("lines:\n%s\nwant:\n%s", got, want)
		}
	}
}

func TestDefault_BucketIdentity(t *testing.T) {
	mon := mustNew(t, Config{})
	for _, kv := range [][2]string{{"a", "bc"}, {"ab", "c"}} {
		m := NewMetric("m", time.Unix(1, 0))
		m.AddTag(kv[0], kv[1])
		m.SetFieldInt64("x", 1)
		if err := mon.Send(&m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := string(mon.AppendLines(nil)), "m,a=bc x=1i 1000000000\nm,ab=c x=1i 1000000000\n"; got != want {
		t.Errorf("lines %q; want %q", got, want)
	}
}

func TestDefault_Endpoint(t *testing.T) {
	mon := mustNew(t, Config{})
	for method, want := range map[string]int{"GET": 200, "HEAD": 200, "POST": 405, "PUT": 405} {
		rec := httptest.NewRecorder()
		mon.ServeHTTP(rec, httptest.NewRequest(method, "/ecsmetrics", nil))
		if rec.Code != want {
			t.Errorf("%s: %d; want %d", method, rec.Code, want)
		}
	}
}

// One Run per endpoint at a time; Run again after the first returned serves the same buckets;
// Send works without Run.
func TestDefault_RunTwiceAndStop(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	mon := mustNew(t, Config{Endpoint: addr + "/ecsmetrics"})
	m := NewMetric("kept", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	if err := mon.Send(&m); err != nil { // no Run yet
		t.Fatal(err)
	}
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mon.Run(ctx) }()
		var body string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if body, _ = getBody("http://" + addr + "/ecsmetrics"); body != "" {
				break
			}
		}
		if body != "kept x=1i 1000000000\n" {
			t.Errorf("round %d: scrape %q", round, body)
		}
		if round == 0 {
			if err := mon.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("a second Run on the same endpoint = %v; want address already in use", err)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if got := string(mon.AppendLines(nil)); got != "kept x=1i 1000000000\n" {
			t.Errorf("after Run returned: %q; want the bucket kept", got)
		}
	}
}

func getBody(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Config.Seed makes the reservoir's draw reproducible.
func TestDefault_ReservoirDraw(t *testing.T) {
	var outs []string
	for range 2 {
		v := make([]float64, 100)
		for i := range v {
			v[i] = float64(i)
		}
		outs = append(outs, histLine(t, Config{ReservoirSize: 5, Seed: 9}, v...))
	}
	if outs[0] != outs[1] {
		t.Errorf("same seed, different draws:\n%s\n%s", outs[0], outs[1])
	}
}
