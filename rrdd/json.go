package rrdd

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/jsonstr"
)

// jsonKind is the type of a parsed JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber // text holds the literal, including the non-standard Infinity, -Infinity, NaN
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a parsed JSON value. Objects keep their members in document order, which matters:
// v2 values pair with datasources in the order the metadata lists them.
type jsonValue struct {
	kind    jsonKind
	text    string // string contents, number literal, "true"/"false"
	members []jsonMember
	items   []jsonValue
}

type jsonMember struct {
	key   string
	pos   int // offset of the key's opening quote, for errors (which never quote the key)
	value jsonValue
}

// get returns the first member named key.
func (v *jsonValue) get(key string) (*jsonValue, bool) {
	for i := range v.members {
		if v.members[i].key == key {
			return &v.members[i].value, true
		}
	}
	return nil, false
}

const maxJSONDepth = 32

// jsonParser is a small strict JSON parser, except that it accepts the bare tokens Infinity,
// -Infinity and NaN that Python's json.dumps writes for non-finite floats.
type jsonParser struct {
	b   []byte
	pos int
}

// parseJSON parses b as exactly one JSON value with optional surrounding whitespace.
func parseJSON(b []byte) (jsonValue, error) {
	p := jsonParser{b: b}
	v, err := p.value(0)
	if err != nil {
		return jsonValue{}, err
	}
	p.space()
	if p.pos != len(p.b) {
		return jsonValue{}, p.errorf("junk after the JSON value")
	}
	return v, nil
}

// errorf returns a syntax error at the parser's offset. Errors say where and what was expected,
// never which bytes were found: they must not quote the file.
func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("json at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) space() {
	for p.pos < len(p.b) {
		switch p.b[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(s string) bool {
	if len(p.b)-p.pos >= len(s) && string(p.b[p.pos:p.pos+len(s)]) == s {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (jsonValue, error) {
	if depth > maxJSONDepth {
		return jsonValue{}, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	p.space()
	if p.pos >= len(p.b) {
		return jsonValue{}, p.errorf("unexpected end of input")
	}
	switch c := p.b[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return jsonValue{kind: jsonString, text: s}, err
	case p.literal("true"):
		return jsonValue{kind: jsonBool, text: "true"}, nil
	case p.literal("false"):
		return jsonValue{kind: jsonBool, text: "false"}, nil
	case p.literal("null"):
		return jsonValue{kind: jsonNull}, nil
	case p.literal("Infinity"):
		return jsonValue{kind: jsonNumber, text: "Infinity"}, nil
	case p.literal("-Infinity"):
		return jsonValue{kind: jsonNumber, text: "-Infinity"}, nil
	case p.literal("NaN"):
		return jsonValue{kind: jsonNumber, text: "NaN"}, nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	default:
		return jsonValue{}, p.errorf("unexpected character")
	}
}

func (p *jsonParser) object(depth int) (jsonValue, error) {
	p.pos++ // {
	v := jsonValue{kind: jsonObject}
	p.space()
	if p.pos < len(p.b) && p.b[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.space()
		if p.pos >= len(p.b) || p.b[p.pos] != '"' {
			return jsonValue{}, p.errorf("expected a member name")
		}
		pos := p.pos
		key, err := p.str()
		if err != nil {
			return jsonValue{}, err
		}
		p.space()
		if p.pos >= len(p.b) || p.b[p.pos] != ':' {
			return jsonValue{}, p.errorf("expected ':' after a member name")
		}
		p.pos++
		val, err := p.value(depth + 1)
		if err != nil {
			return jsonValue{}, err
		}
		v.members = append(v.members, jsonMember{key, pos, val})
		p.space()
		if p.pos >= len(p.b) {
			return jsonValue{}, p.errorf("unexpected end of input in object")
		}
		switch p.b[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return jsonValue{}, p.errorf("expected ',' or '}' in object")
		}
	}
}

func (p *jsonParser) array(depth int) (jsonValue, error) {
	p.pos++ // [
	v := jsonValue{kind: jsonArray}
	p.space()
	if p.pos < len(p.b) && p.b[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		item, err := p.value(depth + 1)
		if err != nil {
			return jsonValue{}, err
		}
		v.items = append(v.items, item)
		p.space()
		if p.pos >= len(p.b) {
			return jsonValue{}, p.errorf("unexpected end of input in array")
		}
		switch p.b[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return jsonValue{}, p.errorf("expected ',' or ']' in array")
		}
	}
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.pos
	if p.b[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.b) && p.b[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return jsonValue{}, p.errorf("malformed number")
	}
	if p.pos < len(p.b) && p.b[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return jsonValue{}, p.errorf("malformed number")
		}
	}
	if p.pos < len(p.b) && (p.b[p.pos] == 'e' || p.b[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.b) && (p.b[p.pos] == '+' || p.b[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return jsonValue{}, p.errorf("malformed number")
		}
	}
	return jsonValue{kind: jsonNumber, text: string(p.b[start:p.pos])}, nil
}

// str parses a string starting at the opening quote and returns its contents.
func (p *jsonParser) str() (string, error) {
	str, next, e := jsonstr.Unquote(p.b, p.pos)
	if e != nil {
		p.pos = e.Pos
		msg := e.Msg
		if strings.HasPrefix(msg, "bad escape '") {
			msg = "bad escape" // jsonstr quotes the escape's character
		}
		return "", p.errorf("%s", msg)
	}
	p.pos = next
	return str, nil
}

func utf8AppendRune(b []byte, r rune) []byte { return utf8.AppendRune(b, r) }
