package alerts

import (
	"strings"
	"testing"
)

// FuzzParseRules: any input gives rules that satisfy ParseRules' promises, or an error that
// quotes nothing of the input beyond line numbers; never a panic.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(goodRules))
	f.Add([]byte("rules:\n  - {name: a, selector: x, op: '<=', threshold: -1e300, for: 0s}\n"))
	f.Add([]byte("rules: [{name: a, selector: '{a=~\"(\"}', op: '>', threshold: 1}]"))
	f.Add([]byte("rules:\n  - name: a\n    selector: x\n    op: '>'\n    threshold: .nan\n"))
	f.Add([]byte("rules: {a: b}"))
	f.Add([]byte("- 1\n- 2"))
	f.Add([]byte("rules:\n  - &a {name: a}\n  - *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseRules(data)
		if err != nil {
			msg := err.Error()
			for _, w := range strings.Fields(string(data)) {
				if len(w) >= 12 && strings.Contains(msg, w) && !strings.Contains(goodRules, w) {
					t.Fatalf("error %q quotes the input's %q", msg, w)
				}
			}
			return
		}
		if len(rs) > MaxRules {
			t.Fatalf("%d rules; at most %d", len(rs), MaxRules)
		}
		names := map[string]bool{}
		for _, r := range rs {
			if r.Selector == nil || r.Name == "" || names[r.Name] || r.For < 0 || !severities[r.Severity] || r.Threshold != r.Threshold {
				t.Fatalf("rule %+v breaks ParseRules' promises", r)
			}
			names[r.Name] = true
			_ = r.Op.Holds(1, r.Threshold)
		}
	})
}
