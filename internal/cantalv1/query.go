package cantalv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
)

// The original's query language (cantal_query): a body {"rules": {NAME: RULE}} where a rule is
// {"series": {"source": SOURCE, "condition": COND}, "extract": EXTRACT, "functions": [FUNC...]}.
// Enums with fields are JSON arrays whose first element names the variant (the original's
// json_enum_decoder); field-less enums (Source, MetricKind, UndefFilter) are strings, or the
// {"variant": NAME, "fields": []} object rustc_serialize also reads. A filter may also be the
// two-element array [SOURCE, COND] of the original's tuple-struct Filter.

// Query is a parsed /query body.
type Query struct {
	Names []string // sorted
	Rules map[string]Rule
}

// Rule is one named rule.
type Rule struct {
	Fine      bool // source Fine (numeric series with history); else Tip (states)
	Cond      *Cond
	Extract   Extract
	Functions []Function
}

// Condition operators.
const (
	CondEq = iota
	CondNotEq
	CondRegexLike
	CondAnd
	CondOr
	CondNot
	CondHas
)

// Cond is a condition on a series' key.
type Cond struct {
	Op          int
	Name, Value string
	Re          *regexp.Regexp
	A, B        *Cond
}

// Extract kinds.
const (
	ExTip = iota
	ExDiffToAtMost
	ExHistoryByNum
	ExHistoryByTime
)

// Extract is what a rule takes from each series: N is the limit (points, or milliseconds for
// HistoryByTime).
type Extract struct {
	Kind int
	N    uint64
}

// Function kinds.
const (
	FnExpect = iota
	FnNonNegativeDerivative
	FnSum
	FnSumBy
	FnStateChart
)

// Function is one step applied to a rule's dataset, in order.
type Function struct {
	Kind   int
	Expect string // FnExpect: SingleSeries, MultiSeries, SingleTip, MultiTip or Chart
	Metric string // FnExpect: Counter, Level or State ("" for Chart)
	Field  string // FnSumBy
	Total  bool   // FnSumBy
	N      uint64 // FnStateChart: distinct values kept
}

// Parse limits: a body is at most maxBody bytes (the original's 65536), with at most maxRules
// rules of at most maxFunctions functions; conditions nest at most maxDepth deep; a regular
// expression is at most maxRegex bytes.
const (
	maxBody      = 65536
	maxRules     = 64
	maxFunctions = 16
	maxDepth     = 32
	maxRegex     = 1024
)

// ParseQuery parses a /query body. Errors say where the body is wrong.
func ParseQuery(b []byte) (*Query, error) {
	if len(b) > maxBody {
		return nil, fmt.Errorf("body is %d bytes, more than %d", len(b), maxBody)
	}
	var top map[string]json.RawMessage
	if err := strictUnmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("body: want {\"rules\": {...}}: %w", err)
	}
	raw, ok := top["rules"]
	if !ok {
		return nil, errors.New(`body: missing "rules"`)
	}
	var rules map[string]json.RawMessage
	if err := strictUnmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("rules: want an object of named rules: %w", err)
	}
	if len(rules) > maxRules {
		return nil, fmt.Errorf("rules: %d rules, more than %d", len(rules), maxRules)
	}
	q := &Query{Rules: make(map[string]Rule, len(rules))}
	for name, r := range rules {
		rule, err := parseRule(r)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", name, err)
		}
		q.Rules[name] = rule
		q.Names = append(q.Names, name)
	}
	sort.Strings(q.Names)
	return q, nil
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the value")
	}
	return nil
}

func parseRule(b []byte) (Rule, error) {
	var r struct {
		Series    json.RawMessage   `json:"series"`
		Extract   json.RawMessage   `json:"extract"`
		Functions []json.RawMessage `json:"functions"`
	}
	var rule Rule
	if err := strictUnmarshal(b, &r); err != nil {
		return rule, fmt.Errorf("want {\"series\", \"extract\", \"functions\"}: %w", err)
	}
	if r.Series == nil || r.Extract == nil || r.Functions == nil {
		return rule, errors.New(`"series", "extract" and "functions" are all required`)
	}
	var err error
	if rule.Fine, rule.Cond, err = parseFilter(r.Series); err != nil {
		return rule, fmt.Errorf("series: %w", err)
	}
	if rule.Extract, err = parseExtract(r.Extract); err != nil {
		return rule, fmt.Errorf("extract: %w", err)
	}
	if len(r.Functions) > maxFunctions {
		return rule, fmt.Errorf("functions: %d, more than %d", len(r.Functions), maxFunctions)
	}
	for i, f := range r.Functions {
		fn, err := parseFunction(f)
		if err != nil {
			return rule, fmt.Errorf("functions[%d]: %w", i, err)
		}
		rule.Functions = append(rule.Functions, fn)
	}
	return rule, nil
}

func parseFilter(b []byte) (fine bool, c *Cond, err error) {
	var src, cond json.RawMessage
	var obj struct {
		Source    json.RawMessage `json:"source"`
		Condition json.RawMessage `json:"condition"`
	}
	var arr []json.RawMessage
	switch {
	case strictUnmarshal(b, &arr) == nil:
		if len(arr) != 2 {
			return false, nil, errors.New("want [SOURCE, CONDITION]")
		}
		src, cond = arr[0], arr[1]
	case strictUnmarshal(b, &obj) == nil && obj.Source != nil && obj.Condition != nil:
		src, cond = obj.Source, obj.Condition
	default:
		return false, nil, errors.New(`want {"source": "Tip"|"Fine", "condition": [...]}`)
	}
	s, err := unitVariant(src)
	if err != nil {
		return false, nil, fmt.Errorf("source: %w", err)
	}
	switch s {
	case "Tip":
	case "Fine":
		fine = true
	default:
		return false, nil, fmt.Errorf("source: unknown %q (Tip or Fine)", s)
	}
	c, err = parseCond(cond, 0)
	if err != nil {
		return false, nil, fmt.Errorf("condition: %w", err)
	}
	return fine, c, nil
}

// unitVariant reads a field-less enum: "Name" or {"variant": "Name", "fields": []}.
func unitVariant(b []byte) (string, error) {
	var s string
	if err := strictUnmarshal(b, &s); err == nil {
		return s, nil
	}
	var o struct {
		Variant *string `json:"variant"`
		Fields  []any   `json:"fields"`
	}
	if err := strictUnmarshal(b, &o); err != nil || o.Variant == nil || len(o.Fields) != 0 {
		return "", errors.New(`want a variant name ("Name" or {"variant": "Name", "fields": []})`)
	}
	return *o.Variant, nil
}

// variant reads ["Name", fields...], checking the number of fields.
func variant(b []byte) (string, []json.RawMessage, error) {
	var arr []json.RawMessage
	if err := strictUnmarshal(b, &arr); err != nil || len(arr) == 0 {
		return "", nil, errors.New(`want ["Variant", fields...]`)
	}
	var name string
	if err := strictUnmarshal(arr[0], &name); err != nil {
		return "", nil, errors.New("the first element must be the variant's name")
	}
	return name, arr[1:], nil
}

func fieldCount(name string, f []json.RawMessage, n int) error {
	if len(f) != n {
		return fmt.Errorf("bad tuple length for %s: %d fields, want %d", name, len(f), n)
	}
	return nil
}

func str(b []byte) (string, error) {
	var s string
	if err := strictUnmarshal(b, &s); err != nil {
		return "", errors.New("want a string")
	}
	return s, nil
}

func uintField(b []byte) (uint64, error) {
	var n json.Number
	if err := strictUnmarshal(b, &n); err != nil {
		return 0, errors.New("want a non-negative integer")
	}
	u, err := parseUint(string(n))
	if err != nil {
		return 0, errors.New("want a non-negative integer")
	}
	return u, nil
}

func parseUint(s string) (uint64, error) {
	var u uint64
	if s == "" {
		return 0, errors.New("empty")
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' || u > (math.MaxUint64-9)/10 {
			return 0, errors.New("not an integer in range")
		}
		u = u*10 + uint64(c-'0')
	}
	return u, nil
}

func parseCond(b []byte, depth int) (*Cond, error) {
	if depth >= maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	name, f, err := variant(b)
	if err != nil {
		return nil, err
	}
	c := &Cond{}
	two := func(op int) error {
		if err := fieldCount(name, f, 2); err != nil {
			return err
		}
		c.Op = op
		if c.Name, err = str(f[0]); err != nil {
			return fmt.Errorf("%s: label name: %w", name, err)
		}
		if c.Value, err = str(f[1]); err != nil {
			return fmt.Errorf("%s: value: %w", name, err)
		}
		return nil
	}
	sub := func(op, n int) error {
		if err := fieldCount(name, f, n); err != nil {
			return err
		}
		c.Op = op
		if c.A, err = parseCond(f[0], depth+1); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n == 2 {
			if c.B, err = parseCond(f[1], depth+1); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	}
	switch name {
	case "Eq":
		err = two(CondEq)
	case "NotEq":
		err = two(CondNotEq)
	case "RegexLike":
		if err = two(CondRegexLike); err == nil {
			if len(c.Value) > maxRegex {
				return nil, fmt.Errorf("RegexLike: expression longer than %d bytes", maxRegex)
			}
			if c.Re, err = regexp.Compile(c.Value); err != nil {
				return nil, fmt.Errorf("RegexLike: invalid regex: %w", err)
			}
		}
	case "And":
		err = sub(CondAnd, 2)
	case "Or":
		err = sub(CondOr, 2)
	case "Not":
		err = sub(CondNot, 1)
	case "Has":
		if err = fieldCount(name, f, 1); err == nil {
			c.Op = CondHas
			if c.Name, err = str(f[0]); err != nil {
				err = fmt.Errorf("Has: label name: %w", err)
			}
		}
	default:
		return nil, fmt.Errorf("unknown condition %q (Eq, NotEq, RegexLike, And, Or, Not, Has)", name)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Match reports whether labels l satisfy c, as the original's Condition::matches: a condition on
// a label the series has not is false (so NotEq needs the label).
func (c *Cond) Match(l map[string]string) bool {
	switch c.Op {
	case CondEq:
		v, ok := l[c.Name]
		return ok && v == c.Value
	case CondNotEq:
		v, ok := l[c.Name]
		return ok && v != c.Value
	case CondRegexLike:
		v, ok := l[c.Name]
		return ok && c.Re.MatchString(v)
	case CondAnd:
		return c.A.Match(l) && c.B.Match(l)
	case CondOr:
		return c.A.Match(l) || c.B.Match(l)
	case CondNot:
		return !c.A.Match(l)
	case CondHas:
		_, ok := l[c.Name]
		return ok
	}
	return false
}

func parseExtract(b []byte) (Extract, error) {
	name, f, err := variant(b)
	if err != nil {
		return Extract{}, err
	}
	var e Extract
	switch name {
	case "Tip":
		return Extract{Kind: ExTip}, fieldCount(name, f, 0)
	case "DiffToAtMost":
		e.Kind = ExDiffToAtMost
	case "HistoryByNum":
		e.Kind = ExHistoryByNum
	case "HistoryByTime":
		e.Kind = ExHistoryByTime
	default:
		return e, fmt.Errorf("unknown extract %q (Tip, DiffToAtMost, HistoryByNum, HistoryByTime)", name)
	}
	if err := fieldCount(name, f, 1); err != nil {
		return e, err
	}
	if e.N, err = uintField(f[0]); err != nil {
		return e, fmt.Errorf("%s: %w", name, err)
	}
	return e, nil
}

func parseFunction(b []byte) (Function, error) {
	name, f, err := variant(b)
	if err != nil {
		return Function{}, err
	}
	var fn Function
	switch name {
	case "Expect":
		fn.Kind = FnExpect
		if err := fieldCount(name, f, 1); err != nil {
			return fn, err
		}
		en, ef, err := variant(f[0])
		if err != nil {
			return fn, fmt.Errorf("Expect: %w", err)
		}
		switch en {
		case "Chart":
			if err := fieldCount(en, ef, 0); err != nil {
				return fn, err
			}
		case "SingleSeries", "MultiSeries", "SingleTip", "MultiTip":
			if err := fieldCount(en, ef, 1); err != nil {
				return fn, err
			}
			mk, err := unitVariant(ef[0])
			if err != nil || (mk != "Counter" && mk != "Level" && mk != "State") {
				return fn, fmt.Errorf("Expect %s: metric kind must be Counter, Level or State", en)
			}
			fn.Metric = mk
		default:
			return fn, fmt.Errorf("Expect: unknown expectation %q", en)
		}
		fn.Expect = en
	case "NonNegativeDerivative":
		fn.Kind = FnNonNegativeDerivative
		err = fieldCount(name, f, 0)
	case "Sum":
		fn.Kind = FnSum
		if err = fieldCount(name, f, 1); err == nil {
			err = undefFilter(f[0])
		}
	case "SumBy":
		fn.Kind = FnSumBy
		if err = fieldCount(name, f, 3); err != nil {
			return fn, err
		}
		if fn.Field, err = str(f[0]); err != nil {
			return fn, fmt.Errorf("SumBy: field: %w", err)
		}
		if err = undefFilter(f[1]); err != nil {
			return fn, err
		}
		if err = strictUnmarshal(f[2], &fn.Total); err != nil {
			return fn, errors.New("SumBy: total: want true or false")
		}
	case "StateChart":
		fn.Kind = FnStateChart
		if err = fieldCount(name, f, 1); err == nil {
			fn.N, err = uintField(f[0])
		}
	default:
		return fn, fmt.Errorf("unknown function %q (Expect, NonNegativeDerivative, Sum, SumBy, StateChart)", name)
	}
	if err != nil {
		return fn, fmt.Errorf("%s: %w", name, err)
	}
	return fn, nil
}

func undefFilter(b []byte) error {
	s, err := unitVariant(b)
	if err != nil || s != "Ignore" {
		return errors.New(`undefined-value filter must be "Ignore"`)
	}
	return nil
}
