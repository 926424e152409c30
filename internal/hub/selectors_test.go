package hub

import (
	"testing"

	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// FuzzCanonicalMatch: the canonical form of a selector parses, is its own canonical form, and
// selects exactly what the selector selects (on label sets made from its own matchers' values),
// so that selectors sharing a subscription never get each other's series. (Issue 31, N8.)
func FuzzCanonicalMatch(f *testing.F) {
	for _, s := range []string{"", "{}", "load", `{metric="load"}`, `{metric="load",metric="load"}`,
		`{metric=~".*"}`, `{b="2", a="1"}`, `{a!="x", a=~"x|y"}`, `{a="\"q\\\\"}`, `{a!~".*"}`, `m{pid="1"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, match string) {
		sel, err := selector.Parse(match)
		if err != nil {
			if c := canonicalMatch(match); c != match {
				t.Fatalf("canonicalMatch(%q) = %q; an unparsable selector must be kept as it is", match, c)
			}
			return
		}
		c := canonicalMatch(match)
		csel, err := selector.Parse(c)
		if err != nil {
			t.Fatalf("canonicalMatch(%q) = %q does not parse: %v", match, c, err)
		}
		if cc := canonicalMatch(c); cc != c {
			t.Fatalf("canonicalMatch(%q) = %q, whose own canonical form is %q", match, c, cc)
		}
		// Label sets from the matchers' values: each label absent, or set to each value seen.
		names := map[string][]string{}
		for _, m := range sel.Matchers() {
			names[m.Name] = append(names[m.Name], m.Value)
		}
		sets := []series.Labels{{}}
		for name, vals := range names {
			var next []series.Labels
			for _, l := range sets {
				next = append(next, l)
				for _, v := range append(vals, "", "other") {
					nl := series.Labels{}
					for k, x := range l {
						nl[k] = x
					}
					nl[name] = v
					next = append(next, nl)
				}
				if len(next) > 512 {
					break
				}
			}
			sets = next
		}
		for _, l := range sets {
			if sel.Match(l) != csel.Match(l) {
				t.Fatalf("%q and its canonical form %q differ on %v", match, c, l)
			}
		}
	})
}
