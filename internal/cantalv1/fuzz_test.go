package cantalv1

import (
	"testing"
)

// FuzzParseQuery: any body parses to a query or an error, never a panic; a parsed query's
// conditions evaluate on any labels.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		`{"rules": {"a": {"series": {"source": "Fine", "condition": ["Eq", "metric", "cpu.user"]}, "extract": ["HistoryByNum", 10], "functions": [["NonNegativeDerivative"], ["Sum", "Ignore"]]}}}`,
		`{"rules": {"b": {"series": ["Tip", ["And", ["Has", "pid"], ["Not", ["RegexLike", "metric", "^x.*"]]]], "extract": ["Tip"], "functions": [["StateChart", 3], ["Expect", ["Chart"]]]}}}`,
		`{"rules": {"c": {"series": {"source": {"variant": "Fine", "fields": []}, "condition": ["Or", ["NotEq", "a", "b"], ["Eq", "c", "d"]]}, "extract": ["HistoryByTime", 60000], "functions": [["SumBy", "device", "Ignore", true], ["Expect", ["MultiSeries", "Counter"]]]}}}`,
		`{"rules": {"d": {"series": {"source": "Fine", "condition": ["Has", "x"]}, "extract": ["DiffToAtMost", 5], "functions": []}}}`,
		`{"rules": {}}`,
		`{"rules": {"e": {"series": {"source": "Fine", "condition": ["Eq", "a"]}, "extract": ["Tip"], "functions": []}}}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := ParseQuery(b)
		if err != nil {
			if q != nil {
				t.Fatalf("error %v with a query", err)
			}
			return
		}
		if len(q.Names) != len(q.Rules) {
			t.Fatalf("%d names for %d rules", len(q.Names), len(q.Rules))
		}
		for _, n := range q.Names {
			r := q.Rules[n]
			if r.Cond == nil {
				t.Fatalf("rule %q without a condition", n)
			}
			r.Cond.Match(map[string]string{"metric": "cpu.user", "pid": "1", "a": "b"})
		}
	})
}
