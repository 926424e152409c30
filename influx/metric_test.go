package influx

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestMetricLine(t *testing.T) {
	// The seed's scrape example.
	m := NewMetric("kafka", time.Unix(0, 1746457955000000000))
	m.AddTag("topic", "aliecs.run")
	m.AddTag("subsystem", "ECS")
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 42)
	if got, want := m.String(), "kafka,subsystem=ECS,topic=aliecs.run send_bytes=1638400u,sent_messages=42u 1746457955000000000"; got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}

	// The seed's construction example, plus every field kind, replacement and escaping.
	m = NewMetric("measurement", time.Time{})
	m.AddTag("tag1", "val1")
	m.SetFieldUInt64("field1", 42)
	if got, want := m.String(), "measurement,tag1=val1 field1=42u"; got != want {
		t.Errorf("String() = %s; want %s (zero timestamp left out)", got, want)
	}
	m.AddTag("tag1", "v 2,x=y")
	m.SetFieldInt64("i", -3)
	m.SetFieldFloat64("f", 1.5)
	m.SetFieldUInt64("field1", 7)
	if got, want := m.String(), `measurement,tag1=v\ 2\,x\=y field1=7u,i=-3i,f=1.5`; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
	if fs := m.Fields(); len(fs) != 3 || fs[0].Uint() != 7 || fs[1].Int() != -3 || fs[2].Float() != 1.5 {
		t.Errorf("Fields() = %+v", fs)
	}

	m.Reset("again", time.Unix(5, 0))
	if len(m.Tags()) != 0 || len(m.Fields()) != 0 || m.Measurement() != "again" || m.Timestamp() != time.Unix(5, 0) {
		t.Errorf("after Reset: %+v", m)
	}
}

func TestMetricTagsSorted(t *testing.T) {
	a := NewMetric("m", time.Time{})
	b := NewMetric("m", time.Time{})
	for _, k := range []string{"c", "a", "b"} {
		a.AddTag(k, k+"v")
	}
	for _, k := range []string{"b", "c", "a"} {
		b.AddTag(k, k+"v")
	}
	a.SetFieldInt64("x", 1)
	b.SetFieldInt64("x", 1)
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "m,a=av,b=bv,c=cv ") {
		t.Errorf("tag order leaked: %s vs %s", a.String(), b.String())
	}
}

func TestMetricInvalid(t *testing.T) {
	cases := map[string]func(*Metric){
		"empty measurement":  func(m *Metric) { m.Reset("", time.Time{}); m.SetFieldInt64("x", 1) },
		"no fields":          func(m *Metric) { m.Reset("m", time.Time{}) },
		"NaN":                func(m *Metric) { m.SetFieldFloat64("f", math.NaN()) },
		"Inf":                func(m *Metric) { m.SetFieldFloat64("f", math.Inf(1)) },
		"newline in name":    func(m *Metric) { m.Reset("a\nb", time.Time{}); m.SetFieldInt64("x", 1) },
		"empty tag value":    func(m *Metric) { m.AddTag("k", "") },
		"control in tag key": func(m *Metric) { m.AddTag("k\x01", "v") },
		"trailing backslash": func(m *Metric) { m.AddTag("k", `v\`) },
		"bad utf-8":          func(m *Metric) { m.SetFieldInt64("\xff", 1) },
		"empty field key":    func(m *Metric) { m.SetFieldInt64("", 1) },
		"timestamp range":    func(m *Metric) { m.SetTimestamp(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)) },
	}
	for name, mutate := range cases {
		m := NewMetric("m", time.Unix(1, 0))
		m.SetFieldInt64("ok", 1)
		mutate(&m)
		if _, err := m.AppendLine(nil); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("%s: AppendLine error = %v; want ErrInvalidMetric", name, err)
		}
		mon := mustNew(t, Config{})
		if err := mon.Send(&m); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("%s: Send error = %v; want ErrInvalidMetric", name, err)
		}
		if err := mon.SendHistogrammable(&m); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("%s: SendHistogrammable error = %v; want ErrInvalidMetric", name, err)
		}
		if n := mon.Stats().Buckets; n != 0 {
			t.Errorf("%s: %d buckets created for a refused metric", name, n)
		}
		if out := mon.AppendLines(nil); len(out) != 0 {
			t.Errorf("%s: invalid metric stored: %s", name, out)
		}
		if !strings.HasPrefix(m.String(), "!") {
			t.Errorf("%s: String() = %q; want an error description", name, m.String())
		}
	}
}
