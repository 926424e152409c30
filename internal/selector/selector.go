// Package selector implements the series selector language of the agent's API and CLI.
//
// A selector picks series by their labels. Three forms are accepted:
//
//	requests.number                        bare name: {metric="requests.number"}
//	{key="v", key!="v", key=~"re", key!~"re"}
//	requests.number{pid="42"}              name and matchers: the name adds metric="..."
//
// The last form is what Prometheus users type, so it is accepted; its name is exactly a bare
// name, and it is an extra `metric` equality matcher ANDed with the others. Prometheus 3's
// quoted-name forms are accepted too: a quoted string alone among the matchers is the metric
// name ({"requests.number", pid="42"}), and a label name may be quoted ({"my label"="v"}).
//
// Details, following PromQL where the brief is silent:
//   - Whitespace (space, tab, CR, LF) is allowed around every token; a trailing comma inside
//     the braces is allowed.
//   - Strings are double-quoted, single-quoted or back-quoted. Double- and single-quoted strings
//     take Go/PromQL escapes (\n, \t, \\, \", \', \xFF, \u00e9, \U0001F600, \377 octal, ...);
//     back-quoted strings are raw.
//   - Bare names are runs of any characters except whitespace, quotes, braces, ',', '=', '!'
//     and '~' (so dots, dashes, slashes and colons are fine: cpu.user, disk/sda, http-reqs).
//     Unquoted label names start with a letter or '_' and continue with letters, digits, '_',
//     '.', ':' and '-'.
//   - A missing label has the value "": {pid=""} matches series without a pid label and
//     {pid!=""} those that have a non-empty one.
//   - Regular expressions use RE2 syntax (package regexp), are anchored at both ends and run in
//     single-line mode ('.' matches a newline), like Prometheus: {metric=~"cpu\\..*"}.
//   - {} matches every series, and so does an empty or blank selector (an absent ?match=).
//   - All matchers must hold (logical AND). Conflicting matchers are not an error; they just
//     match nothing.
//
// Errors are *SyntaxError values saying where the input went wrong:
// "selector: at offset 7: expected '=', '!=', '=~' or '!~' after label name".
//
// A parsed *Selector is immutable and safe for concurrent use by any number of goroutines.
package selector

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/series"
)

// MetricLabel is the label a bare name stands for.
const MetricLabel = "metric"

// Op is a matcher's comparison.
type Op uint8

// The comparisons of the matcher syntax.
const (
	Equal          Op = iota // =
	NotEqual                 // !=
	MatchRegexp              // =~
	NotMatchRegexp           // !~
)

// String returns the operator as written in a selector: =, !=, =~ or !~.
func (o Op) String() string {
	switch o {
	case Equal:
		return "="
	case NotEqual:
		return "!="
	case MatchRegexp:
		return "=~"
	case NotMatchRegexp:
		return "!~"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Matcher is one condition on one label. The zero value is not usable; matchers come from Parse.
// A Matcher is immutable and safe for concurrent use.
type Matcher struct {
	Name  string
	Op    Op
	Value string // the literal value, or the regular expression as written (unanchored)

	re *regexp.Regexp
	// Regexp fast paths, decided at parse time from the regexp's syntax tree.
	fast fastKind
	set  []string // fastSet: the regexp matches exactly these strings
}

type fastKind uint8

const (
	fastNone     fastKind = iota // run the regexp
	fastSet                      // a finite set of literals
	fastAny                      // .*
	fastNonEmpty                 // .+
)

// Matches reports whether a label value satisfies m. A missing label is passed as "".
// It does not allocate.
func (m *Matcher) Matches(v string) bool {
	switch m.Op {
	case Equal:
		return v == m.Value
	case NotEqual:
		return v != m.Value
	case MatchRegexp:
		return m.matchRegexp(v)
	case NotMatchRegexp:
		return !m.matchRegexp(v)
	}
	return false
}

func (m *Matcher) matchRegexp(v string) bool {
	switch m.fast {
	case fastSet:
		return slices.Contains(m.set, v)
	case fastAny:
		return true
	case fastNonEmpty:
		return v != ""
	}
	return m.re.MatchString(v)
}

// String returns the matcher in selector syntax, e.g. pid!="42".
func (m *Matcher) String() string {
	var b strings.Builder
	m.appendTo(&b)
	return b.String()
}

func (m *Matcher) appendTo(b *strings.Builder) {
	if isIdent(m.Name) {
		b.WriteString(m.Name)
	} else {
		b.WriteString(strconv.Quote(m.Name))
	}
	b.WriteString(m.Op.String())
	b.WriteString(strconv.Quote(m.Value))
}

// cost orders matchers for evaluation: cheap and selective first.
func (m *Matcher) cost() int {
	switch {
	case m.Op == Equal:
		return 0
	case m.Op == NotEqual:
		return 1
	case m.fast != fastNone:
		return 2
	}
	return 3
}

// Selector is a parsed selector: a conjunction of matchers. A nil *Selector matches every series.
// A Selector is immutable and safe for concurrent use.
type Selector struct {
	matchers []Matcher // in the order written
	eval     []Matcher // the same, cheapest first
	names    []string  // metric values the selector is limited to, when namesOK
	namesOK  bool
}

// Matchers returns a copy of the selector's matchers in the order they were written (a leading
// name comes first as metric="name").
func (s *Selector) Matchers() []Matcher {
	if s == nil {
		return nil
	}
	return slices.Clone(s.matchers)
}

// Match reports whether a series with labels l is selected. It does not allocate.
func (s *Selector) Match(l series.Labels) bool {
	if s == nil {
		return true
	}
	for i := range s.eval {
		m := &s.eval[i]
		if !m.Matches(l[m.Name]) {
			return false
		}
	}
	return true
}

// Constrains reports whether some matcher of s is on the label name. A nil *Selector
// constrains no label.
func (s *Selector) Constrains(name string) bool {
	if s == nil {
		return false
	}
	for i := range s.matchers {
		if s.matchers[i].Name == name {
			return true
		}
	}
	return false
}

// Only reports whether every matcher of s is on the label name (true for the empty selector):
// then MatchValue(name, v) is Match of any series whose value of name is v, and an index keyed
// by that label answers the selector without reading the series' other labels.
func (s *Selector) Only(name string) bool {
	if s == nil {
		return true
	}
	for i := range s.matchers {
		if s.matchers[i].Name != name {
			return false
		}
	}
	return true
}

// MatchValue reports whether v, as the value of the label name ("" for a missing one),
// satisfies every matcher of s on that label; matchers on other labels are not looked at. An
// index keyed by the label's values (such as the registry's by metric name) uses it to pick
// the values whose series may match. It does not allocate.
func (s *Selector) MatchValue(name, v string) bool {
	if s == nil {
		return true
	}
	for i := range s.eval {
		if m := &s.eval[i]; m.Name == name && !m.Matches(v) {
			return false
		}
	}
	return true
}

// Values is MetricNames for any label: the finite set of values of the label name that a
// selected series can have (from its = and =~ matchers with a finite set of literals, every
// other matcher on the label applied to them; "" stands for a missing label too), and false
// when the label is not limited to a finite set. The slice is the caller's.
func (s *Selector) Values(name string) ([]string, bool) {
	if s == nil {
		return nil, false
	}
	var vals []string
	ok := false
	for i := range s.matchers {
		m := &s.matchers[i]
		if m.Name != name {
			continue
		}
		var set []string
		switch {
		case m.Op == Equal:
			set = []string{m.Value}
		case m.Op == MatchRegexp && m.fast == fastSet:
			set = m.set
		default:
			continue
		}
		if !ok {
			vals, ok = slices.Clone(set), true
			continue
		}
		vals = slices.DeleteFunc(vals, func(v string) bool { return !slices.Contains(set, v) })
	}
	if !ok {
		return nil, false
	}
	vals = slices.DeleteFunc(vals, func(v string) bool { return !s.MatchValue(name, v) })
	slices.Sort(vals)
	return slices.Compact(vals), true
}

// Prefix returns a prefix that the value of the label name has in every series s selects:
// the longest of an = matcher's value and the literal prefixes of the =~ matchers on the label
// ("" when none says anything). An index ordered by the label's values reads only the values
// from the prefix on.
func (s *Selector) Prefix(name string) string {
	if s == nil {
		return ""
	}
	best := ""
	for i := range s.matchers {
		m := &s.matchers[i]
		if m.Name != name {
			continue
		}
		var p string
		switch m.Op {
		case Equal:
			p = m.Value
		case MatchRegexp:
			p, _ = m.re.LiteralPrefix()
		}
		if len(p) > len(best) {
			best = p
		}
	}
	return best
}

// MetricName returns the one value of the metric label a selected series can have, when the
// selector pins it (metric="x", a bare name, or metric=~"x"). An index keyed by metric name can
// then look up candidates directly instead of scanning every series; candidates must still be
// checked with Match, which applies the other matchers. The value "" stands for series without
// a metric label as well as with an empty one.
func (s *Selector) MetricName() (string, bool) {
	if s == nil || !s.namesOK || len(s.names) != 1 {
		return "", false
	}
	return s.names[0], true
}

// MetricNames is MetricName for selectors that limit the metric label to a finite set, such as
// metric=~"a|b|c" (possibly empty when the matchers contradict each other: nothing matches).
// It returns false when the metric label is not limited to a finite set. The returned slice is
// shared and must not be modified.
func (s *Selector) MetricNames() ([]string, bool) {
	if s == nil || !s.namesOK {
		return nil, false
	}
	return s.names, true
}

// String returns the selector in matcher syntax: {metric="requests.number"} for a bare name,
// {} for an empty selector. Parse(s.String()) selects the same series as s.
func (s *Selector) String() string {
	if s == nil {
		return "{}"
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := range s.matchers {
		if i > 0 {
			b.WriteString(", ")
		}
		s.matchers[i].appendTo(&b)
	}
	b.WriteByte('}')
	return b.String()
}

// SyntaxError is the error returned by Parse: what was wrong and at which byte offset of the
// input. Err, when not nil, is the underlying cause (a regexp or string-escape error).
type SyntaxError struct {
	Offset int
	Msg    string
	Err    error
}

// Error returns "selector: at offset N: msg".
func (e *SyntaxError) Error() string {
	s := "selector: at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause.
func (e *SyntaxError) Unwrap() error { return e.Err }

// Parse parses a selector. See the package documentation for the syntax. A blank s gives the
// empty selector {}, which matches every series.
func Parse(s string) (*Selector, error) {
	p := parser{s: s}
	ms, err := p.parse()
	if err != nil {
		return nil, err
	}
	return newSelector(ms), nil
}

// MustParse is Parse for selectors known to be valid (constants, tests); it panics on error.
func MustParse(s string) *Selector {
	sel, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

func newSelector(ms []Matcher) *Selector {
	sel := &Selector{matchers: ms, eval: slices.Clone(ms)}
	slices.SortStableFunc(sel.eval, func(a, b Matcher) int { return a.cost() - b.cost() })
	// Intersect every finite constraint on the metric label.
	for i := range ms {
		m := &ms[i]
		if m.Name != MetricLabel {
			continue
		}
		var set []string
		switch {
		case m.Op == Equal:
			set = []string{m.Value}
		case m.Op == MatchRegexp && m.fast == fastSet:
			set = m.set
		default:
			continue
		}
		if !sel.namesOK {
			sel.names, sel.namesOK = slices.Clone(set), true
			continue
		}
		sel.names = slices.DeleteFunc(sel.names, func(n string) bool { return !slices.Contains(set, n) })
	}
	if sel.namesOK {
		// Apply the remaining metric matchers to the candidate names, so that
		// metric="a", metric!="a" yields an empty set.
		sel.names = slices.DeleteFunc(sel.names, func(n string) bool {
			for i := range ms {
				if ms[i].Name == MetricLabel && !ms[i].Matches(n) {
					return true
				}
			}
			return false
		})
		slices.Sort(sel.names)
		sel.names = slices.Compact(sel.names)
	}
	return sel
}

// newMatcher builds a matcher, compiling and analysing a regexp. at is the offset of the value
// for error messages.
func newMatcher(name string, op Op, value string, at int) (Matcher, error) {
	m := Matcher{Name: name, Op: op, Value: value}
	if op != MatchRegexp && op != NotMatchRegexp {
		return m, nil
	}
	re, err := regexp.Compile("^(?s:" + value + ")$")
	if err != nil {
		// Report the error of the expression as written, not of the anchored wrapper.
		if _, err2 := syntax.Parse(value, syntax.Perl); err2 != nil {
			err = err2
		}
		return m, &SyntaxError{Offset: at, Msg: "invalid regular expression", Err: err}
	}
	m.re = re
	if tree, err := syntax.Parse("(?s:"+value+")", syntax.Perl); err == nil {
		m.fast, m.set = analyse(tree.Simplify())
	}
	return m, nil
}

// maxSet bounds the literal sets recognised as fast paths; longer alternations use the regexp.
const maxSet = 16

// analyse recognises regexps that need no regexp engine: a literal, an alternation of literals,
// .* and .+ (single-line mode).
func analyse(re *syntax.Regexp) (fastKind, []string) {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return fastSet, []string{""}
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return fastNone, nil
		}
		if slices.Contains(re.Rune, utf8.RuneError) {
			// The regexp engine matches U+FFFD against invalid UTF-8 too; let it.
			return fastNone, nil
		}
		return fastSet, []string{string(re.Rune)}
	case syntax.OpStar, syntax.OpPlus:
		if re.Sub[0].Op == syntax.OpAnyChar {
			if re.Op == syntax.OpStar {
				return fastAny, nil
			}
			return fastNonEmpty, nil
		}
	case syntax.OpAlternate:
		if len(re.Sub) > maxSet {
			return fastNone, nil
		}
		var set []string
		for _, sub := range re.Sub {
			k, s := analyse(sub)
			if k != fastSet {
				return fastNone, nil
			}
			set = append(set, s...)
			if len(set) > maxSet {
				return fastNone, nil
			}
		}
		return fastSet, set
	case syntax.OpConcat:
		// The parser factors common prefixes: "cpu.user|cpu.system" becomes
		// cpu\.(?:user|system). Expand small products of literal sets.
		set := []string{""}
		for _, sub := range re.Sub {
			k, s := analyse(sub)
			if k != fastSet || len(set)*len(s) > maxSet {
				return fastNone, nil
			}
			next := make([]string, 0, len(set)*len(s))
			for _, a := range set {
				for _, b := range s {
					next = append(next, a+b)
				}
			}
			set = next
		}
		return fastSet, set
	case syntax.OpCharClass:
		// A small class like [ab] (as factored from "xa|xb").
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if int(hi-lo)+1+len(set) > maxSet {
				return fastNone, nil
			}
			if lo <= utf8.RuneError && utf8.RuneError <= hi {
				return fastNone, nil
			}
			for r := lo; r <= hi; r++ {
				set = append(set, string(r))
			}
		}
		return fastSet, set
	}
	return fastNone, nil
}

// isIdent reports whether s can be written as an unquoted label name.
func isIdent(s string) bool {
	if s == "" || !identStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !identPart(s[i]) {
			return false
		}
	}
	return true
}

func identStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func identPart(c byte) bool {
	return identStart(c) || ('0' <= c && c <= '9') || c == '.' || c == ':' || c == '-'
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isNameByte reports whether c may appear in a bare name.
func isNameByte(c byte) bool {
	switch c {
	case '{', '}', '"', '\'', '`', ',', '=', '!', '~':
		return false
	}
	return c > ' ' && c != 0x7f
}

type parser struct {
	s   string
	pos int
}

func (p *parser) errorf(at int, format string, args ...any) error {
	return &SyntaxError{Offset: at, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.s) && isSpace(p.s[p.pos]) {
		p.pos++
	}
}

// found describes what is at the current position, for error messages.
func (p *parser) found() string {
	if p.pos >= len(p.s) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
	return strconv.QuoteRune(r)
}

func (p *parser) parse() ([]Matcher, error) {
	p.skipSpace()
	if p.pos == len(p.s) {
		return nil, nil // blank: no matchers, every series
	}
	var ms []Matcher
	if p.s[p.pos] != '{' {
		start := p.pos
		for p.pos < len(p.s) && isNameByte(p.s[p.pos]) {
			p.pos++
		}
		if p.pos == start {
			return nil, p.errorf(p.pos, "expected a metric name or '{', found %s", p.found())
		}
		ms = append(ms, Matcher{Name: MetricLabel, Op: Equal, Value: p.s[start:p.pos]})
		p.skipSpace()
		if p.pos == len(p.s) {
			return ms, nil
		}
		if p.s[p.pos] != '{' {
			return nil, p.errorf(p.pos, "expected '{' or end of input after metric name, found %s", p.found())
		}
	}
	p.pos++ // '{'
	for {
		p.skipSpace()
		if p.pos == len(p.s) {
			return nil, p.errorf(p.pos, "expected a label name or '}', found end of input")
		}
		if p.s[p.pos] == '}' {
			p.pos++
			break
		}
		m, err := p.matcher()
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
		p.skipSpace()
		if p.pos == len(p.s) {
			return nil, p.errorf(p.pos, "expected ',' or '}', found end of input")
		}
		switch p.s[p.pos] {
		case ',':
			p.pos++
		case '}':
		default:
			return nil, p.errorf(p.pos, "expected ',' or '}', found %s", p.found())
		}
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.errorf(p.pos, "expected end of input after '}', found %s", p.found())
	}
	return ms, nil
}

// matcher parses `name op "value"` or a quoted metric name.
func (p *parser) matcher() (Matcher, error) {
	start := p.pos
	var name string
	if c := p.s[p.pos]; c == '"' || c == '\'' || c == '`' {
		s, err := p.str()
		if err != nil {
			return Matcher{}, err
		}
		p.skipSpace()
		if p.pos == len(p.s) || p.s[p.pos] == ',' || p.s[p.pos] == '}' {
			// Prometheus 3: a quoted string alone is the metric name.
			return Matcher{Name: MetricLabel, Op: Equal, Value: s}, nil
		}
		name = s
	} else {
		if !identStart(c) {
			return Matcher{}, p.errorf(p.pos, "expected a label name, found %s", p.found())
		}
		for p.pos < len(p.s) && identPart(p.s[p.pos]) {
			p.pos++
		}
		name = p.s[start:p.pos]
		p.skipSpace()
	}
	opAt := p.pos
	var op Op
	switch {
	case strings.HasPrefix(p.s[p.pos:], "=~"):
		op, p.pos = MatchRegexp, p.pos+2
	case strings.HasPrefix(p.s[p.pos:], "!~"):
		op, p.pos = NotMatchRegexp, p.pos+2
	case strings.HasPrefix(p.s[p.pos:], "!="):
		op, p.pos = NotEqual, p.pos+2
	case strings.HasPrefix(p.s[p.pos:], "="):
		op, p.pos = Equal, p.pos+1
	default:
		return Matcher{}, p.errorf(opAt, "expected '=', '!=', '=~' or '!~' after label name %q, found %s", name, p.found())
	}
	p.skipSpace()
	valueAt := p.pos
	if p.pos == len(p.s) || (p.s[p.pos] != '"' && p.s[p.pos] != '\'' && p.s[p.pos] != '`') {
		return Matcher{}, p.errorf(p.pos, "expected a quoted value after %s%s, found %s", name, op, p.found())
	}
	value, err := p.str()
	if err != nil {
		return Matcher{}, err
	}
	return newMatcher(name, op, value, valueAt)
}

// str parses a quoted string at p.pos.
func (p *parser) str() (string, error) {
	start := p.pos
	quote := p.s[p.pos]
	p.pos++
	if quote == '`' {
		end := strings.IndexByte(p.s[p.pos:], '`')
		if end < 0 {
			return "", p.errorf(start, "unterminated string")
		}
		s := p.s[p.pos : p.pos+end]
		p.pos += end + 1
		return s, nil
	}
	// Fast path: no escapes.
	if end := strings.IndexByte(p.s[p.pos:], quote); end >= 0 && !strings.ContainsAny(p.s[p.pos:p.pos+end], "\\\n") {
		s := p.s[p.pos : p.pos+end]
		p.pos += end + 1
		return s, nil
	}
	var b strings.Builder
	for {
		if p.pos >= len(p.s) || p.s[p.pos] == '\n' {
			return "", p.errorf(start, "unterminated string")
		}
		c := p.s[p.pos]
		if c == quote {
			p.pos++
			return b.String(), nil
		}
		if c != '\\' {
			b.WriteByte(c) // raw bytes, including invalid UTF-8, are kept as they are
			p.pos++
			continue
		}
		at := p.pos
		rest := p.s[p.pos:]
		r, multibyte, tail, err := strconv.UnquoteChar(rest, quote)
		if err != nil {
			return "", &SyntaxError{Offset: at, Msg: "invalid escape sequence in string", Err: err}
		}
		if r < utf8.RuneSelf || !multibyte {
			b.WriteByte(byte(r))
		} else {
			b.WriteRune(r)
		}
		p.pos += len(rest) - len(tail)
	}
}
