package cli

import (
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// table writes tab-separated rows aligned in columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row writes one row; cells are cleaned of control characters so that neither a hostile label
// nor a state text can break the layout or the terminal.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(t.tw, "\t")
		}
		io.WriteString(t.tw, clean(c))
	}
	io.WriteString(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// clean returns s with control characters, invalid UTF-8 and other non-printable runes escaped
// as in a Go string literal.
func clean(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			q := strconv.QuoteToGraphic(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// num is a number of the API: a JSON number, or one of the strings "NaN", "+Inf", "-Inf" that
// stand for the values JSON cannot carry (apiwire.Number: its literal kept, so that large
// integers print exactly).
type num = apiwire.Number

// numString formats a number for a table: "-" when absent, integers exactly.
func numString(n num) string {
	if !n.Valid {
		return "-"
	}
	if n.IsInt() {
		return n.Raw
	}
	return formatFloat(n.F)
}

func isIntLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// formatFloat prints f with about six significant digits, without exponents for everyday
// magnitudes.
func formatFloat(f float64) string {
	a := math.Abs(f)
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case a == 0:
		return "0"
	case a >= 1e15 || a < 1e-4:
		return strconv.FormatFloat(f, 'g', 4, 64)
	case a >= 1e5:
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// formatBytes prints a byte count with binary units: 512 B, 1.5 KiB, 3.2 GiB.
func formatBytes(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return formatFloat(f)
	}
	const units = "KMGTPE"
	a := math.Abs(f)
	if a < 1024 {
		return formatFloat(f) + " B"
	}
	i := -1
	for a >= 1024 && i < len(units)-1 {
		a /= 1024
		f /= 1024
		i++
	}
	prec := 1
	if a >= 100 {
		prec = 0
	}
	return strconv.FormatFloat(f, 'f', prec, 64) + " " + units[i:i+1] + "iB"
}

// withUnit formats a value with the unit a series declares in its "unit" label.
func withUnit(n num, unit string) string {
	if !n.Valid {
		return "-"
	}
	switch unit {
	case "":
		return numString(n)
	case "bytes", "byte", "B":
		return formatBytes(n.F)
	}
	return numString(n) + " " + unit
}

// formatDuration prints d rounded to about three significant digits: 850ms, 12.3s, 3h12m5s.
func formatDuration(d time.Duration) string {
	switch a := d.Abs(); {
	case a >= time.Minute:
		d = d.Round(time.Second)
	case a >= time.Second:
		d = d.Round(10 * time.Millisecond)
	case a >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	}
	return d.String()
}

// formatTime prints a unix-ms time as local date and time with its age: 2006-01-02 15:04:05
// (12s ago). 0 is "never".
func (c *CLI) formatTime(ms int64) string {
	if ms == 0 {
		return "never"
	}
	t := time.UnixMilli(ms)
	return t.In(c.loc()).Format("2006-01-02 15:04:05") + " (" + c.age(ms) + ")"
}

// age prints how long ago a unix-ms time was: 12s ago, 3m ago, in 2s.
func (c *CLI) age(ms int64) string {
	if ms == 0 {
		return "never"
	}
	d := c.now().Sub(time.UnixMilli(ms))
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, " ahead"
	}
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		d = d.Truncate(time.Second)
	case d < time.Hour:
		d = d.Truncate(time.Minute)
	default:
		d = d.Truncate(time.Minute)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") { // 3m0s → 3m, not 10s → 1
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s + suffix
}

// seriesName prints labels the way a selector names them: metric{k="v", ...} with sorted
// keys, so that a name can be pasted into --match.
func seriesName(labels map[string]string) string {
	var b strings.Builder
	metric, hasMetric := labels["metric"]
	bare := hasMetric && metric != "" && isBareName(metric)
	if bare {
		b.WriteString(metric)
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "metric" || !bare {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		if !bare {
			b.WriteString("{}")
		}
		return b.String()
	}
	sort.Slice(keys, func(i, j int) bool {
		// metric first when it could not be written bare
		if (keys[i] == "metric") != (keys[j] == "metric") {
			return keys[i] == "metric"
		}
		return keys[i] < keys[j]
	})
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if isLabelName(k) {
			b.WriteString(k)
		} else {
			b.WriteString(strconv.Quote(k))
		}
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// isBareName mirrors the selector grammar's bare names.
func isBareName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return false
		case strings.IndexByte("{}\"'`,=!~", c) >= 0:
			return false
		}
	}
	return utf8.ValidString(s)
}

// isLabelName mirrors the selector grammar's unquoted label names.
func isLabelName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || !(('0' <= c && c <= '9') || c == '.' || c == ':' || c == '-')) {
			return false
		}
	}
	return s != ""
}
