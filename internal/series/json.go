package series

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// MarshalJSON writes the API's series object. Non-finite floats, which JSON cannot hold, are
// written as the strings "NaN", "+Inf" and "-Inf".
func (s Sample) MarshalJSON() ([]byte, error) {
	return s.AppendJSON(make([]byte, 0, 128)), nil
}

// AppendJSON appends the JSON form of s to b.
func (s *Sample) AppendJSON(b []byte) []byte {
	b = append(b, `{"labels":`...)
	b = append(b, s.Labels.Key()...)
	b = append(b, `,"kind":"`...)
	b = append(b, s.Kind.String()...)
	b = append(b, `","value":`...)
	switch s.Kind {
	case Counter:
		b = strconv.AppendUint(b, s.Bits, 10)
	case Level:
		b = strconv.AppendInt(b, int64(s.Bits), 10)
	case Float:
		b = AppendFloat(b, math.Float64frombits(s.Bits))
	case State:
		b = AppendJSONString(b, s.Text)
	default:
		b = append(b, "null"...)
	}
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, s.TS, 10)
	if s.Kind == Counter && s.HasRate {
		b = append(b, `,"rate":`...)
		b = AppendFloat(b, s.Rate)
	}
	if s.Kind == State {
		b = append(b, `,"text":`...)
		b = AppendJSONString(b, s.Text)
		b = append(b, `,"since":`...)
		b = strconv.AppendInt(b, s.Since, 10)
	}
	return append(b, '}')
}

// AppendFloat appends f as a JSON number, or as the string "NaN", "+Inf" or "-Inf".
func AppendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// AppendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as encoding/json
// does; control characters are escaped.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		// A run of bytes written as they are (most labels are nothing else) is copied at once.
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '"' && s[j] != '\\' {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
