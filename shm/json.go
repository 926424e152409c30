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

// parseLabels parses the JSON subset allowed in a metadata line: one flat object with string
// keys and string values, at least one key, every key once, surrounded by optional JSON
// whitespace. Escapes, including \uXXXX surrogate pairs as Python's json.dumps writes them, are
// decoded; a lone surrogate becomes U+FFFD as in encoding/json. The input must be valid UTF-8.
func parseLabels(s []byte) (map[string]string, error) {
	p := jsonParser{s: s}
	p.ws()
	if !p.eat('{') {
		return nil, p.errorf("metadata must be a JSON object")
	}
	labels := make(map[string]string, 2)
	p.ws()
	if p.eat('}') {
		return nil, errors.New("metadata object has no keys")
	}
	for {
		p.ws()
		if p.peek() != '"' {
			return nil, p.errorf("expected a string key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if !p.eat(':') {
			return nil, p.errorf("expected ':' after a key")
		}
		p.ws()
		if p.peek() != '"' {
			return nil, p.errorf("a value is not a string")
		}
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := labels[k]; dup {
			return nil, p.errorf("duplicate key in metadata object")
		}
		labels[k] = v
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			break
		}
		return nil, p.errorf("expected ',' or '}'")
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.errorf("trailing data after metadata object")
	}
	return labels, nil
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
		case ' ', '\t':
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
