// Package alerts evaluates the agent's threshold rules after every scan and keeps the alerts
// they raise: the built-in rules (CPU busy, memory available, filesystem space, node down,
// set by flags) and the rules of a YAML file (a selector, a function, a comparison, a threshold
// and a duration each). An alert goes inactive → pending (the condition holds) → firing (it has
// held for the rule's for) and is dropped at once when the condition stops holding.
//
// Concurrency and ownership: an Engine is evaluated by one goroutine, the agent's scan
// goroutine (Engine.Eval), and read by any number of others (Engine.Alerts), which get an
// immutable snapshot published after each evaluation. Rules are immutable once parsed.
package alerts

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/cantal-go/cantal/internal/selector"
)

// Fn is what a rule compares: a series' latest value, or a counter's rate per second.
type Fn uint8

// The functions.
const (
	FnValue Fn = iota // the latest value
	FnRate            // a counter's rate per second between its last two points
)

func (f Fn) String() string {
	if f == FnRate {
		return "rate"
	}
	return "value"
}

// Op is a rule's comparison: value Op threshold holds → the alert is pending or firing.
type Op uint8

// The comparisons.
const (
	OpGT Op = iota // >
	OpLT           // <
	OpGE           // >=
	OpLE           // <=
)

func (o Op) String() string { return [...]string{">", "<", ">=", "<="}[o] }

// Holds reports whether v op threshold. NaN never holds.
func (o Op) Holds(v, threshold float64) bool {
	switch o {
	case OpGT:
		return v > threshold
	case OpLT:
		return v < threshold
	case OpGE:
		return v >= threshold
	default:
		return v <= threshold
	}
}

func parseOp(s string) (Op, bool) {
	switch s {
	case ">":
		return OpGT, true
	case "<":
		return OpLT, true
	case ">=":
		return OpGE, true
	case "<=":
		return OpLE, true
	}
	return 0, false
}

// Rule is one threshold rule over the series a selector matches: an alert per matching series
// whose Fn value compares with Threshold by Op for at least For.
type Rule struct {
	Name      string
	Selector  *selector.Selector
	Fn        Fn
	Op        Op
	Threshold float64
	For       time.Duration
	Severity  string
	Summary   string
}

// Limits of a rules file, so a mistaken file cannot take the agent's memory or its scans.
const (
	MaxRulesFileBytes = 1 << 20
	MaxRules          = 1000
	maxNameBytes      = 200
	maxSummaryBytes   = 1000
)

// Severities a rule may have; the default is warning.
var severities = map[string]bool{"info": true, "warning": true, "critical": true}

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]*$`)

// fileRule is a rule as the YAML file writes it.
type fileRule struct {
	Name      string   `yaml:"name"`
	Selector  string   `yaml:"selector"`
	Fn        string   `yaml:"fn"`
	Op        string   `yaml:"op"`
	Threshold *float64 `yaml:"threshold"`
	For       string   `yaml:"for"`
	Severity  string   `yaml:"severity"`
	Summary   string   `yaml:"summary"`
}

type file struct {
	Rules []fileRule `yaml:"rules"`
}

var yamlLine = regexp.MustCompile(`line \d+`)

// ParseRules parses a rules file:
//
//	rules:
//	  - name: queue_backlog         # required: [A-Za-z_][A-Za-z0-9_.:-]*, unique
//	    selector: '{metric="queue.len"}'  # required: the agent's selector syntax
//	    fn: value                   # value (default) or rate (counters only)
//	    op: ">"                     # > < >= <=, required
//	    threshold: 100              # required
//	    for: 1m                     # default 0: fires at the first scan it holds
//	    severity: warning           # info, warning (default) or critical
//	    summary: queue backlog      # free text shown with the alert
//
// Parsing is strict: an unknown key, a missing required field or a bad value is an error.
// Errors name the rule by its position and the YAML line, never quoting the file's contents
// (the agent, running as root, could be pointed at a file its user may not read).
func ParseRules(data []byte) ([]Rule, error) {
	if len(data) > MaxRulesFileBytes {
		return nil, fmt.Errorf("rules file larger than %d bytes", MaxRulesFileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		// yaml's messages quote the offending text; keep only where it is.
		where := yamlLine.FindAllString(err.Error(), 3)
		if len(where) == 0 {
			return nil, errors.New("rules file is not valid YAML of the expected shape")
		}
		return nil, fmt.Errorf("rules file is not valid YAML of the expected shape (at %s)", strings.Join(where, ", "))
	}
	if len(f.Rules) > MaxRules {
		return nil, fmt.Errorf("rules file has %d rules; at most %d", len(f.Rules), MaxRules)
	}
	out := make([]Rule, 0, len(f.Rules))
	names := map[string]bool{}
	for i, fr := range f.Rules {
		r, err := fr.rule()
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		if names[r.Name] {
			return nil, fmt.Errorf("rule %d: name used by an earlier rule", i+1)
		}
		names[r.Name] = true
		out = append(out, r)
	}
	return out, nil
}

func (fr fileRule) rule() (Rule, error) {
	r := Rule{Name: fr.Name, Summary: fr.Summary, Severity: fr.Severity}
	if len(fr.Name) > maxNameBytes || !namePattern.MatchString(fr.Name) {
		return r, errors.New("name missing or not of [A-Za-z_][A-Za-z0-9_.:-]* (at most 200 bytes)")
	}
	if len(fr.Summary) > maxSummaryBytes {
		return r, fmt.Errorf("summary longer than %d bytes", maxSummaryBytes)
	}
	if strings.TrimSpace(fr.Selector) == "" {
		return r, errors.New("selector missing (a rule over every series is not allowed)")
	}
	sel, err := selector.Parse(fr.Selector)
	if err != nil {
		var se *selector.SyntaxError
		if errors.As(err, &se) {
			return r, fmt.Errorf("selector does not parse (at byte %d)", se.Offset)
		}
		return r, errors.New("selector does not parse")
	}
	r.Selector = sel
	switch fr.Fn {
	case "", "value":
		r.Fn = FnValue
	case "rate":
		r.Fn = FnRate
	default:
		return r, errors.New("fn must be value or rate")
	}
	op, ok := parseOp(fr.Op)
	if !ok {
		return r, errors.New("op must be one of > < >= <=")
	}
	r.Op = op
	if fr.Threshold == nil || math.IsNaN(*fr.Threshold) {
		return r, errors.New("threshold missing or not a number")
	}
	r.Threshold = *fr.Threshold
	if fr.For != "" {
		d, err := time.ParseDuration(fr.For)
		if err != nil || d < 0 {
			return r, errors.New("for must be a non-negative duration such as 30s or 5m")
		}
		r.For = d
	}
	switch {
	case r.Severity == "":
		r.Severity = "warning"
	case !severities[r.Severity]:
		return r, errors.New("severity must be info, warning or critical")
	}
	return r, nil
}
