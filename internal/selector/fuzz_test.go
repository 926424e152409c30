package selector

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/series"
)

// FuzzParse checks that Parse never panics, that what it accepts prints back into a selector
// that selects the same series, and that the regexp fast paths agree with the regexp engine.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`requests.number`, `{}`, `{metric="a", pid!="1"}`, `{metric=~"cpu\\..*", x!~"a|b"}`,
		`req{pid="1"}`, `{"req.total", pid="1"}`, `{"my label"="v"}`, "{a=`raw\\`}",
		`{a='it\'s', b="\xff\u00e9\101"}`, `{a=~"(?i)x[a-c](d|e)"}`, `{a=~".+", b=~".*"}`, `{pid=42}`,
		`{a="1"}}`, `{a=~"("}`, "{\n a = \"1\" ,\r\n}",
	} {
		f.Add(s, "a", "requests.number")
	}
	f.Fuzz(func(t *testing.T, s, v1, v2 string) {
		sel, err := Parse(s)
		if err != nil {
			if sel != nil {
				t.Fatalf("Parse(%q) returned a selector and an error", s)
			}
			return
		}
		again, err := Parse(sel.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", s, sel.String(), err)
		}
		if again.String() != sel.String() {
			t.Fatalf("round trip of %q: %q then %q", s, sel.String(), again.String())
		}
		labels := []series.Labels{{}, {"metric": v1}, {"metric": v2, "a": v1}, {"a": v2, "pid": v1, "b": v2}}
		for _, l := range labels {
			if sel.Match(l) != again.Match(l) {
				t.Fatalf("%q and its round trip %q disagree on %v", s, sel.String(), l)
			}
		}
		for _, m := range sel.Matchers() {
			if m.Op != MatchRegexp && m.Op != NotMatchRegexp {
				continue
			}
			re := regexp.MustCompile("^(?s:" + m.Value + ")$")
			for _, v := range []string{v1, v2, "", m.Value} {
				if (m.Op == MatchRegexp) != (m.Matches(v) == re.MatchString(v)) {
					t.Fatalf("matcher %s (fast path %d) on %q disagrees with the regexp engine", m.String(), m.fast, v)
				}
			}
		}
		for _, label := range []string{"metric", "a", "pid"} {
			// Values agrees with MetricNames, and no series outside the values is selected.
			vals, ok := sel.Values(label)
			if label == "metric" {
				names, nok := sel.MetricNames()
				if ok != nok || !slices.Equal(vals, names) {
					t.Fatalf("%q: Values(metric) = %q, %v; MetricNames() = %q, %v", s, vals, ok, names, nok)
				}
			}
			for _, l := range labels {
				if ok && sel.Match(l) && !contains(vals, l[label]) {
					t.Fatalf("%q matches %s=%q outside Values(%s) %q", s, label, l[label], label, vals)
				}
				if p := sel.Prefix(label); sel.Match(l) && !strings.HasPrefix(l[label], p) {
					t.Fatalf("%q matches %s=%q without its Prefix(%s) %q", s, label, l[label], label, p)
				}
			}
		}
		if names, ok := sel.MetricNames(); ok {
			// Every series outside the names must be rejected.
			l := series.Labels{"metric": v1, "a": v2}
			if sel.Match(l) && !contains(names, v1) {
				t.Fatalf("%q matches metric %q outside MetricNames() %q", s, v1, names)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FuzzMatchKey checks MatchKey against Match of the parsed key: whenever MatchKey reads a key
// (ok), the key parses and both agree; canonical keys (series.Labels.Key) of plain labels are
// always read.
func FuzzMatchKey(f *testing.F) {
	for _, c := range [][3]string{
		{`{pid="42"}`, `{"metric":"process.cpu","pid":"42"}`, "42"},
		{`process.cpu{pid!="1"}`, `{"metric":"process.cpu","pid":"1"}`, "x"},
		{`{metric=~"cgroup\\..*"}`, `{"cgroup":"a/b","metric":"cgroup.cpu"}`, "é"},
		{`{a=""}`, `{}`, ""},
		{`{a="x"}`, `{"a":"y","a":"x"}`, "x"},
		{`{a="\n"}`, `{"a":"\n"}`, "\n"},
		{`{a="x"}`, `{"a":"x"} `, "\xff"},
		{`{a=~".+"}`, `{"a":null}`, "a"},
		{`{}`, `{"a":"\u00e9"}`, "é"},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, s, key, v string) {
		sel, err := Parse(s)
		if err != nil {
			return
		}
		check := func(key string) {
			m, ok := sel.MatchKey(key)
			if !ok {
				return
			}
			l, err := series.ParseKey(key)
			if err != nil {
				t.Fatalf("MatchKey read %q, which does not parse: %v", key, err)
			}
			if want := sel.Match(l); m != want {
				t.Fatalf("%s on %q: MatchKey %v, Match %v", sel, key, m, want)
			}
		}
		check(key)
		for _, l := range []series.Labels{{"metric": v}, {"metric": "m", "pid": v, "a": v}, {"a": v, "b": "x"}} {
			k := l.Key()
			check(k)
			if _, ok := sel.MatchKey(k); !ok && utf8.ValidString(v) && !strings.ContainsAny(v, "\"\\") && !hasControl(v) {
				t.Fatalf("MatchKey does not read the canonical key %q", k)
			}
		}
	})
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
