// Package apiwire holds the Go types of the agent's JSON API messages (DESIGN.md's contracts):
// the answers of /api/v1/metrics, history, stats, peers, cluster/metrics, cluster/history,
// alerts and cluster/alerts, and the error object. The agent's handlers write most answers
// with hand-written appenders (no reflection on the 2 s path); these types encode to exactly
// the same bytes (a test in internal/api checks every answer against a real handler's) and
// decode them, so clients (the cantal CLI, peers) share one definition.
//
// Numbers JSON cannot carry are written as the strings "NaN", "+Inf" and "-Inf"; Number
// decodes them (and keeps a number's literal, so that a counter above 2^53 prints exactly and
// re-encodes unchanged).
//
// The types are plain values with no shared state: safe to use from any goroutine as long as
// one value is not written concurrently.
package apiwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
)

// Number is a number of the API: a JSON number, or one of the strings "NaN", "+Inf", "-Inf"
// (and "Inf") standing for the values JSON cannot carry. The zero value is an absent number
// (JSON null).
type Number struct {
	F     float64 // the value
	Raw   string  // the JSON literal it was decoded from; "" for the NaN/Inf strings or when made by Float
	Valid bool    // false: absent (null, or a member left out)
}

// Float returns f as a Number, written as series.AppendFloat writes it (shortest 'g' format).
func Float(f float64) Number { return Number{F: f, Valid: true} }

// IsInt reports whether n was decoded from an integer literal (n.Raw then holds it exactly,
// even beyond 2^53).
func (n Number) IsInt() bool {
	s := n.Raw
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AppendJSON appends n: null when absent, its literal when it was decoded from one, else as
// series.AppendFloat writes it.
func (n Number) AppendJSON(b []byte) []byte {
	switch {
	case !n.Valid:
		return append(b, "null"...)
	case n.Raw != "":
		return append(b, n.Raw...)
	}
	return series.AppendFloat(b, n.F)
}

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) { return n.AppendJSON(nil), nil }

// errNotNumber is returned for anything but a JSON number, null or one of the NaN/Inf strings.
// It does not quote the input.
var errNotNumber = errors.New(`want a number or "NaN", "+Inf", "-Inf"`)

// UnmarshalJSON implements json.Unmarshaler: a JSON number, null (absent), or the strings
// "NaN", "+Inf", "Inf", "-Inf". Anything else is an error that does not quote the input.
func (n *Number) UnmarshalJSON(b []byte) error {
	switch s := string(b); s {
	case "null":
		*n = Number{}
		return nil
	case `"NaN"`:
		*n = Number{F: math.NaN(), Valid: true}
		return nil
	case `"+Inf"`, `"Inf"`:
		*n = Number{F: math.Inf(1), Valid: true}
		return nil
	case `"-Inf"`:
		*n = Number{F: math.Inf(-1), Valid: true}
		return nil
	}
	if !isJSONNumber(b) {
		return fmt.Errorf("number: %w (%d bytes)", errNotNumber, len(b))
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("number: %w", errNotNumber)
	}
	// A literal beyond float64's range parses to ±Inf (ErrRange): kept, with its literal.
	*n = Number{F: f, Raw: string(b), Valid: true}
	return nil
}

// isJSONNumber reports whether b is exactly one JSON number (RFC 8259: -?int frac? exp?).
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(b)
}

// StdFloat is a float64 written as encoding/json writes one, except that NaN and ±Inf (which
// encoding/json refuses) are written as the strings "NaN", "+Inf", "-Inf"; it decodes what
// Number decodes. The alert answers use it.
type StdFloat float64

// MarshalJSON implements json.Marshaler.
func (f StdFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return series.AppendFloat(nil, v), nil
	}
	return json.Marshal(v)
}

// UnmarshalJSON implements json.Unmarshaler; null leaves f unchanged, as for a float64.
func (f *StdFloat) UnmarshalJSON(b []byte) error {
	var n Number
	if err := n.UnmarshalJSON(b); err != nil {
		return err
	}
	if n.Valid {
		*f = StdFloat(n.F)
	}
	return nil
}

// ErrorAnswer is every error answer: {"error": "..."} with a 4xx or 5xx code.
type ErrorAnswer struct {
	Error string `json:"error"`
}
