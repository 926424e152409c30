package selector

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`requests.number`, `{metric="requests.number"}`},
		{`  requests.number  `, `{metric="requests.number"}`},
		{`disk/sda-1:ops`, `{metric="disk/sda-1:ops"}`},
		{`{}`, `{}`},
		{` { } `, `{}`},
		{``, `{}`},
		{" \t\n", `{}`},
		{`{metric="a"}`, `{metric="a"}`},
		{`{pid!="42"}`, `{pid!="42"}`},
		{`{metric=~"cpu\\..*"}`, `{metric=~"cpu\\..*"}`},
		{`{metric!~'x'}`, `{metric!~"x"}`},
		{"{metric=`a\\b`}", `{metric="a\\b"}`},
		{`{a="1",b="2",}`, `{a="1", b="2"}`},
		{"{\n\ta = \"1\" ,\r\n b!= '2'\n}", `{a="1", b!="2"}`},
		{`req{pid="1"}`, `{metric="req", pid="1"}`},
		{`req {pid="1"}`, `{metric="req", pid="1"}`},
		{`req{}`, `{metric="req"}`},
		{`{"req.total", pid="1"}`, `{metric="req.total", pid="1"}`},
		{`{"my label"="v"}`, `{"my label"="v"}`},
		{`{a="\n\t\"\x41\u00e9\101"}`, `{a="\n\t\"AéA"}`},
		{`{a='it\'s'}`, `{a="it's"}`},
		{`{a="\xff"}`, `{a="\xff"}`},
		{`{_a.b:c-d="x"}`, `{_a.b:c-d="x"}`},
		{`{a="ünï"}`, `{a="ünï"}`},
	} {
		sel, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q) error: %v", tc.in, err)
			continue
		}
		if got := sel.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %s; want %s", tc.in, got, tc.want)
		}
		again, err := Parse(sel.String())
		if err != nil || again.String() != sel.String() {
			t.Errorf("Parse(%q) does not round-trip: %v, %v", sel.String(), again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		offset int
		msg    string
	}{
		{`{`, 1, "expected a label name or '}', found end of input"},
		{`{pid}`, 4, `expected '=', '!=', '=~' or '!~' after label name "pid", found '}'`},
		{`{pid=42}`, 5, `expected a quoted value after pid=, found '4'`},
		{`{pid="42"`, 9, `expected ',' or '}', found end of input`},
		{`{pid="42" x}`, 10, `expected ',' or '}', found 'x'`},
		{`{pid="42}`, 5, `unterminated string`},
		{"{pid=`42}", 5, `unterminated string`},
		{"{pid=\"4\n2\"}", 5, `unterminated string`},
		{`{pid="\q"}`, 6, `invalid escape sequence in string`},
		{`{pid=~"("}`, 6, "invalid regular expression: error parsing regexp: missing closing ): `(`"},
		{`{1a="x"}`, 1, `expected a label name, found '1'`},
		{`{,}`, 1, `expected a label name, found ','`},
		{`a b`, 2, `expected '{' or end of input after metric name, found 'b'`},
		{`=x`, 0, `expected a metric name or '{', found '='`},
		{`{a="1"} x`, 8, `expected end of input after '}', found 'x'`},
		{`{a="1"}}`, 7, `expected end of input after '}', found '}'`},
		{`{a=="1"}`, 3, `expected a quoted value after a=, found '='`},
		{`{"x" "y"}`, 5, `expected '=', '!=', '=~' or '!~' after label name "x", found '"'`},
	} {
		_, err := Parse(tc.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error = %v; want a *SyntaxError", tc.in, err)
			continue
		}
		want := fmt.Sprintf("selector: at offset %d: %s", tc.offset, tc.msg)
		if se.Offset != tc.offset || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q) error = %q; want prefix %q", tc.in, err, want)
		}
	}
	var se *SyntaxError
	if _, err := Parse(`{a=~"("}`); !errors.As(err, &se) || se.Unwrap() == nil {
		t.Errorf("Parse(bad regexp) error = %v; want a SyntaxError wrapping the regexp error", err)
	}
}

func TestMatch(t *testing.T) {
	req := series.Labels{"metric": "requests.number", "pid": "42", "process": "nginx"}
	cpu := series.Labels{"metric": "cpu.user", "cpu": "0"}
	bare := series.Labels{"cgroup": "x"}
	all := []series.Labels{req, cpu, bare}
	for _, tc := range []struct {
		sel  string
		want []bool // req, cpu, bare
	}{
		{`{}`, []bool{true, true, true}},
		{`requests.number`, []bool{true, false, false}},
		{`requests`, []bool{false, false, false}},
		{`{metric="cpu.user"}`, []bool{false, true, false}},
		{`{metric!="cpu.user"}`, []bool{true, false, true}},
		{`{metric=~"cpu\\..*"}`, []bool{false, true, false}},
		{`{metric=~"cpu"}`, []bool{false, false, false}}, // anchored
		{`{metric=~".*user"}`, []bool{false, true, false}},
		{`{metric!~"cpu\\..*"}`, []bool{true, false, true}},
		{`{pid=""}`, []bool{false, true, true}},
		{`{pid!=""}`, []bool{true, false, false}},
		{`{pid=~".+"}`, []bool{true, false, false}},
		{`{pid=~".*"}`, []bool{true, true, true}},
		{`{pid=~"4[0-9]"}`, []bool{true, false, false}},
		{`{metric=~"requests.number|cpu.user"}`, []bool{true, true, false}},
		{`{metric=~"(?i)CPU.USER"}`, []bool{false, true, false}},
		{`requests.number{process="nginx", pid=~"4."}`, []bool{true, false, false}},
		{`requests.number{process="apache"}`, []bool{false, false, false}},
		{`{metric="cpu.user", metric="requests.number"}`, []bool{false, false, false}},
	} {
		sel := MustParse(tc.sel)
		for i, l := range all {
			if got := sel.Match(l); got != tc.want[i] {
				t.Errorf("Parse(%q).Match(%v) = %v; want %v", tc.sel, l, got, tc.want[i])
			}
		}
	}
	var nilSel *Selector
	if !nilSel.Match(req) || nilSel.String() != "{}" {
		t.Error("nil selector should match everything and print as {}")
	}
}

func TestRegexpSingleLine(t *testing.T) {
	if !MustParse(`{a=~"x.y"}`).Match(series.Labels{"a": "x\ny"}) {
		t.Error(`{a=~"x.y"} should match "x\ny" ('.' matches newline, as in Prometheus)`)
	}
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		sel   string
		names []string
		ok    bool
	}{
		{`requests.number`, []string{"requests.number"}, true},
		{`{metric="a", pid="1"}`, []string{"a"}, true},
		{`{metric=~"a"}`, []string{"a"}, true},
		{`{metric=~"b|a"}`, []string{"a", "b"}, true},
		{`{metric=~"cpu\\.(user|system)"}`, []string{"cpu.system", "cpu.user"}, true},
		{`{metric=~"cpu.user|cpu.system"}`, nil, false}, // '.' is any character
		{`{metric=~"b|a", metric!="b"}`, []string{"a"}, true},
		{`{metric="a", metric="b"}`, []string{}, true},
		{`{metric="a", metric=~"a|c"}`, []string{"a"}, true},
		{`{metric=~"a.*"}`, nil, false},
		{`{metric!="a"}`, nil, false},
		{`{pid="1"}`, nil, false},
		{`{}`, nil, false},
	} {
		sel := MustParse(tc.sel)
		names, ok := sel.MetricNames()
		if ok != tc.ok || !slices.Equal(names, tc.names) || (ok && names == nil) {
			t.Errorf("Parse(%q).MetricNames() = %q, %v; want %q, %v", tc.sel, names, ok, tc.names, tc.ok)
		}
		name, ok1 := sel.MetricName()
		if wantOK := tc.ok && len(tc.names) == 1; ok1 != wantOK || (ok1 && name != tc.names[0]) {
			t.Errorf("Parse(%q).MetricName() = %q, %v", tc.sel, name, ok1)
		}
	}
}

// TestFastPathsAgreeWithRegexp checks that every regexp fast path gives the answer the regexp
// engine gives.
func TestFastPathsAgreeWithRegexp(t *testing.T) {
	patterns := []string{"", "a", "abc", "a|b", "(a|b)c", "x(a|bc)(d|e)", "[abc]", "[a-c]x", ".*", ".+",
		"(.*)", "a.*", "(?i)a", "\ufffd", "[\ufffd]", "é|ü", "a||b", "(a)", "(?:a|b)+", "a?"}
	values := []string{"", "a", "b", "c", "ab", "ac", "bc", "abc", "xad", "xbce", "ax", "A", "\xff", "\ufffd",
		"é", "ü", "\n", "aa", "xae"}
	for _, p := range patterns {
		m, err := newMatcher("l", MatchRegexp, p, 0)
		if err != nil {
			t.Fatalf("newMatcher(%q): %v", p, err)
		}
		re := regexp.MustCompile("^(?s:" + p + ")$")
		for _, v := range values {
			if got, want := m.Matches(v), re.MatchString(v); got != want {
				t.Errorf("matcher %q (fast path %d) Matches(%q) = %v; regexp says %v", p, m.fast, v, got, want)
			}
		}
	}
	// Sanity: the fast paths are actually taken where expected.
	for p, want := range map[string]fastKind{"a|b": fastSet, ".*": fastAny, ".+": fastNonEmpty, "a.*": fastNone, "cpu\\.(user|system)": fastSet} {
		if m, _ := newMatcher("l", MatchRegexp, p, 0); m.fast != want {
			t.Errorf("newMatcher(%q).fast = %d; want %d", p, m.fast, want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	sel := MustParse(`requests.number{process=~"ngi.x", pid!="1", cgroup=~"a|b|", x!~".+"}`)
	l := series.Labels{"metric": "requests.number", "pid": "42", "process": "nginx", "cgroup": "b"}
	if !sel.Match(l) {
		t.Fatal("selector does not match")
	}
	if n := testing.AllocsPerRun(100, func() { sel.Match(l) }); n != 0 {
		t.Errorf("Match allocates %v times per call; want 0", n)
	}
}

func TestMatchersCopy(t *testing.T) {
	sel := MustParse(`a{b="c"}`)
	ms := sel.Matchers()
	if len(ms) != 2 || ms[0].String() != `metric="a"` || ms[1].String() != `b="c"` {
		t.Fatalf("Matchers() = %v", ms)
	}
	ms[0].Value = "zzz"
	if sel.String() != `{metric="a", b="c"}` {
		t.Errorf("modifying Matchers() result changed the selector: %s", sel)
	}
}
