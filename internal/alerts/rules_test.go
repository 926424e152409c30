package alerts

import (
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

const goodRules = `
rules:
  - name: queue_backlog
    selector: '{metric="queue.len", queue=~"in.*"}'
    op: ">"
    threshold: 100
    for: 1m
    severity: critical
    summary: queue backlog
  - name: errors
    selector: http.errors
    fn: rate
    op: ">="
    threshold: 0.5
`

func TestParseRules(t *testing.T) {
	rs, err := ParseRules([]byte(goodRules))
	if err != nil {
		t.Fatalf("ParseRules: %v", err)
	}
	if len(rs) != 2 {
		t.Fatalf("ParseRules: %d rules; want 2", len(rs))
	}
	r := rs[0]
	if r.Name != "queue_backlog" || r.Op != OpGT || r.Threshold != 100 || r.For != time.Minute || r.Severity != "critical" || r.Fn != FnValue || r.Summary != "queue backlog" {
		t.Errorf("rule 1 = %+v", r)
	}
	if !r.Selector.Match(series.Labels{"metric": "queue.len", "queue": "inbox"}) || r.Selector.Match(series.Labels{"metric": "queue.len", "queue": "out"}) {
		t.Errorf("rule 1's selector matches wrongly: %s", r.Selector)
	}
	r = rs[1]
	if r.Fn != FnRate || r.Op != OpGE || r.Threshold != 0.5 || r.For != 0 || r.Severity != "warning" {
		t.Errorf("rule 2 = %+v", r)
	}
}

func TestParseRulesErrors(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, tc := range []struct{ name, in, want string }{
		{"unknown key", "rules:\n  - name: a\n    selector: x\n    op: '>'\n    threshold: 1\n    " + secret + ": 1\n", "line 6"},
		{"not yaml", "rules: [" + secret, "not valid YAML"},
		{"no name", "rules:\n  - selector: x\n    op: '>'\n    threshold: 1\n", "rule 1: name"},
		{"bad name", "rules:\n  - name: '" + secret + " x'\n    selector: x\n    op: '>'\n    threshold: 1\n", "rule 1: name"},
		{"no selector", "rules:\n  - name: a\n    op: '>'\n    threshold: 1\n", "selector missing"},
		{"bad selector", "rules:\n  - name: a\n    selector: '{" + secret + "'\n    op: '>'\n    threshold: 1\n", "selector does not parse"},
		{"bad op", "rules:\n  - name: a\n    selector: x\n    op: '=='\n    threshold: 1\n", "op must be"},
		{"no threshold", "rules:\n  - name: a\n    selector: x\n    op: '>'\n", "threshold missing"},
		{"bad fn", "rules:\n  - name: a\n    selector: x\n    fn: " + secret + "\n    op: '>'\n    threshold: 1\n", "fn must be"},
		{"bad for", "rules:\n  - name: a\n    selector: x\n    op: '>'\n    threshold: 1\n    for: " + secret + "\n", "for must be"},
		{"negative for", "rules:\n  - name: a\n    selector: x\n    op: '>'\n    threshold: 1\n    for: -1s\n", "for must be"},
		{"bad severity", "rules:\n  - name: a\n    selector: x\n    op: '>'\n    threshold: 1\n    severity: " + secret + "\n", "severity must be"},
		{"duplicate", "rules:\n  - {name: a, selector: x, op: '>', threshold: 1}\n  - {name: a, selector: y, op: '<', threshold: 1}\n", "rule 2: name used"},
		{"too big", "rules: []\n" + strings.Repeat("#", MaxRulesFileBytes), "larger than"},
	} {
		_, err := ParseRules([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: ParseRules succeeded; want an error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseRules error %q; want it to contain %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: ParseRules error %q quotes the file", tc.name, err)
		}
	}
	if rs, err := ParseRules([]byte("  \n")); err != nil || len(rs) != 0 {
		t.Errorf("ParseRules(blank) = %v, %v; want no rules, no error", rs, err)
	}
}
