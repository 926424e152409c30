// Package jsonstr decodes JSON string literals for the small hand-written JSON parsers of the
// libraries (shm's metadata subset, rrdd's order-preserving metadata), which need positions and
// member order that encoding/json does not give. It has no state; its function is safe for
// concurrent use.
package jsonstr

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Error is a malformed string literal: Pos is the offset in the input where it was noticed.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// Unquote decodes the string literal whose opening quote is at b[i], returning the string and
// the offset just past its closing quote. Escapes follow RFC 8259; a lone or mismatched UTF-16
// surrogate becomes U+FFFD. Raw bytes are copied as they are (invalid UTF-8 included: callers
// that want valid UTF-8 check it).
func Unquote(b []byte, i int) (string, int, *Error) {
	i++ // opening quote
	start := i
	for i < len(b) { // fast path: no escapes
		c := b[i]
		if c == '"' {
			return string(b[start:i]), i + 1, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		i++
	}
	buf := append([]byte(nil), b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(buf), i + 1, nil
		case c < 0x20:
			return "", 0, &Error{i, "control character in string"}
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		i++ // backslash
		if i >= len(b) {
			break
		}
		e := b[i]
		i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(b, i)
			if !ok {
				return "", 0, &Error{i, `bad \u escape`}
			}
			i += 4
			if utf16.IsSurrogate(r) {
				second := utf8.RuneError
				if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
					lo, ok := hex4(b, i+2)
					if !ok {
						return "", 0, &Error{i + 2, `bad \u escape`}
					}
					if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
						second = d
						i += 6
					}
				}
				r = second
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", 0, &Error{i - 1, "bad escape '\\" + string(rune(e)) + "'"}
		}
	}
	return "", 0, &Error{len(b), "unterminated string"}
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
