package metrics

import (
	"bytes"
	"fmt"
	"slices"
)

// appendSnapshotJSON appends snap as libprocess writes its snapshot (stout's jsonify of a
// std::map<string, double>): an object with the keys in byte order, no spaces, no newline after
// it, each key escaped as stout's StringWriter escapes (", \, / as \/, \b, \f, \n, \r, \t, and
// other bytes below 0x20 and 0x7f as \u00XX; other bytes as they are) and each value as
// appendLibprocessDouble writes it.
func appendSnapshotJSON(b []byte, snap map[string]float64) []byte {
	keys := make([]string, 0, len(snap))
	for k := range snap {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLibprocessString(b, k)
		b = append(b, ':')
		b = appendLibprocessDouble(b, snap[k])
	}
	return append(b, '}')
}

func appendLibprocessString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '/':
			b = append(b, `\/`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if c < 0x20 || c == 0x7f {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}

// appendLibprocessDouble appends v as stout's NumberWriter writes a double: printf's "%#.15g"
// (15 significant digits, a decimal point always), then the trailing zeros removed and, if that
// leaves a final '.', a 0 added: 42 is 42.0, 0.1 is 0.1, 9.9 is 9.9, 1e10 is 10000000000.0.
//
// One deliberate difference: in exponent form stout removes the zeros at the end of the
// exponent too, so that 1e20 ("1.00000000000000e+20") comes out as 1.00000000000000e+2, a
// hundred; here exponent forms are written untrimmed, with their true value.
func appendLibprocessDouble(b []byte, v float64) []byte {
	start := len(b)
	b = fmt.Appendf(b, "%#.15g", v)
	if bytes.IndexByte(b[start:], 'e') >= 0 {
		return b
	}
	for len(b) > start+1 && b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	if b[len(b)-1] == '.' {
		b = append(b, '0')
	}
	return b
}
