package shm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/jsonstr"
)

// maxJSONDepth bounds the nesting of arrays and objects in a metadata line. The original agent's
// parser has no bound; a deeper value is refused with the file, rather than walked.
const maxJSONDepth = 64

// parseLabels parses a metadata line's JSON as the original agent does (cantal_values'
// Metadata::read with rustc_serialize's Json::from_str, then Key::from_json): any JSON value,
// surrounded by optional whitespace, is valid; invalid JSON is an error (the original refuses the
// whole file). Only an object whose values are all strings gives labels; a key given twice
// counts once, with its last value. For a value that is not an object, or an object with a value
// that is not a string (a number, true, false, null, an array, an object), drop is the reason
// the entry cannot be read and labels is nil. An empty object gives empty labels. Escapes,
// including \uXXXX surrogate pairs as Python's json.dumps writes them, are decoded; a lone
// surrogate becomes U+FFFD as in encoding/json. The input must be valid UTF-8.
func parseLabels(s []byte) (labels map[string]string, drop string, err error) {
	p := jsonParser{s: s}
	p.ws()
	if p.peek() != '{' {
		if err := p.skipValue(); err != nil {
			return nil, "", err
		}
		drop = "metadata is not a JSON object"
	} else {
		p.i++
		labels = make(map[string]string, 2)
		var other map[string]bool // keys whose last value is not a string
		p.ws()
		if !p.eat('}') {
			for {
				p.ws()
				if p.peek() != '"' {
					return nil, "", p.errorf("expected a string key")
				}
				k, err := p.str()
				if err != nil {
					return nil, "", err
				}
				p.ws()
				if !p.eat(':') {
					return nil, "", p.errorf("expected ':' after a key")
				}
				p.ws()
				if p.peek() == '"' {
					v, err := p.str()
					if err != nil {
						return nil, "", err
					}
					labels[k] = v
					delete(other, k)
				} else {
					if err := p.skipValue(); err != nil {
						return nil, "", err
					}
					if other == nil {
						other = make(map[string]bool, 1)
					}
					other[k] = true
					delete(labels, k)
				}
				p.ws()
				if p.eat(',') {
					continue
				}
				if p.eat('}') {
					break
				}
				return nil, "", p.errorf("expected ',' or '}'")
			}
		}
		if len(other) > 0 {
			labels, drop = nil, "a label value is not a string"
		}
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, "", p.errorf("trailing data after metadata")
	}
	return labels, drop, nil
}

// skipValue checks and skips one JSON value at p.i, keeping a stack of the open arrays and
// objects (at most maxJSONDepth) instead of recursing.
func (p *jsonParser) skipValue() error {
	var stack []byte // '[' or '{' per open container
	for {
		p.ws()
		// A value.
		switch c := p.peek(); {
		case c == '"':
			if _, err := p.str(); err != nil {
				return err
			}
		case c == '{' || c == '[':
			if len(stack) == maxJSONDepth {
				return p.errorf("arrays and objects nested deeper than %d", maxJSONDepth)
			}
			p.i++
			stack = append(stack, c)
			p.ws()
			if c == '[' && p.eat(']') || c == '{' && p.eat('}') {
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				if err := p.key(); err != nil {
					return err
				}
			}
			continue
		case c == 't':
			if !p.word("true") {
				return p.errorf("expected a value")
			}
		case c == 'f':
			if !p.word("false") {
				return p.errorf("expected a value")
			}
		case c == 'n':
			if !p.word("null") {
				return p.errorf("expected a value")
			}
		case c == '-' || c >= '0' && c <= '9':
			if err := p.number(); err != nil {
				return err
			}
		default:
			return p.errorf("expected a value")
		}
		// After a value: close containers or go on to the next member.
		for {
			if len(stack) == 0 {
				return nil
			}
			p.ws()
			top := stack[len(stack)-1]
			if p.eat(',') {
				if top == '{' {
					if err := p.key(); err != nil {
						return err
					}
				}
				break
			}
			if top == '[' && p.eat(']') || top == '{' && p.eat('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			return p.errorf("expected ',' or the end of an array or object")
		}
	}
}

// key parses `"key" :` inside an object being skipped.
func (p *jsonParser) key() error {
	p.ws()
	if p.peek() != '"' {
		return p.errorf("expected a string key")
	}
	if _, err := p.str(); err != nil {
		return err
	}
	p.ws()
	if !p.eat(':') {
		return p.errorf("expected ':' after a key")
	}
	return nil
}

func (p *jsonParser) word(w string) bool {
	if len(p.s)-p.i >= len(w) && string(p.s[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) number() error {
	p.eat('-')
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.eat('0') {
		// no more integer digits
	} else if digits() == 0 {
		return p.errorf("bad number")
	}
	if p.eat('.') && digits() == 0 {
		return p.errorf("bad number")
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if digits() == 0 {
			return p.errorf("bad number")
		}
	}
	return nil
}

type jsonParser struct {
	s []byte
	i int
}

// errorf returns a syntax error at the parser's column. It says where and what was expected,
// never which bytes were found: errors must not quote the file.
func (p *jsonParser) errorf(format string, args ...any) error {
	where := "end of metadata"
	if p.i < len(p.s) {
		where = fmt.Sprintf("column %d", p.i+1)
	}
	return fmt.Errorf("bad JSON at %s: %s", where, fmt.Sprintf(format, args...))
}

func (p *jsonParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *jsonParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

// str parses a JSON string starting at the opening quote.
func (p *jsonParser) str() (string, error) {
	str, next, e := jsonstr.Unquote(p.s, p.i)
	if e != nil {
		p.i = e.Pos
		msg := e.Msg
		if strings.HasPrefix(msg, "bad escape '") {
			msg = "bad escape" // jsonstr quotes the escape's character
		}
		return "", p.errorf("%s", msg)
	}
	p.i = next
	if !utf8.ValidString(str) {
		return "", errors.New("bad JSON: string is not valid UTF-8")
	}
	return str, nil
}

// appendLabelsJSON appends labels as the existing clients write them: Python's
// json.dumps(labels, sort_keys=True) with its defaults, that is keys sorted, ", " between
// members, ": " after a key, and every character outside printable ASCII escaped (\uXXXX with
// lowercase hex, surrogate pairs above U+FFFF). keys must be sorted.
func appendLabelsJSON(b []byte, keys []string, labels map[string]string) []byte {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPyString(b, k)
		b = append(b, ": "...)
		b = appendPyString(b, labels[k])
	}
	return append(b, '}')
}

func appendPyString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r >= 0x20 && r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			b = u(u(b, hi), lo)
		default:
			b = u(b, r)
		}
	}
	return append(b, '"')
}

// labelsKey returns a canonical identity of a label set, used to find duplicates.
func labelsKey(keys []string, labels map[string]string) string {
	var b []byte
	for _, k := range keys {
		b = strconv.AppendQuote(b, k)
		b = append(b, '=')
		b = strconv.AppendQuote(b, labels[k])
		b = append(b, ',')
	}
	return string(b)
}
