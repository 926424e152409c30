package rrddrpc

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on what ParseCall accepts, besides the byte limit of the request body (Options).
const (
	// MaxDepth is how deeply values may nest: an array or struct in a param is depth 2.
	// The plugin API's deepest param (a struct of strings, or of an enum as an array) is 3.
	MaxDepth = 8
	// MaxValues is the most values a call may hold, at any depth.
	MaxValues = 256
	// MaxMethodName is the longest method name accepted, in bytes.
	MaxMethodName = 128
)

// ErrSyntax is wrapped by every error of ParseCall about a malformed call.
var ErrSyntax = errors.New("malformed XML-RPC call")

// Call is one XML-RPC method call.
//
// A param or member value is one of: nil (<nil/>), string (<string>, an untyped <value>,
// <dateTime.iso8601>), int64 (<int>, <i4>, <i8>), bool (<boolean>), float64 (<double>),
// []byte (<base64>), []any (<array>) or map[string]any (<struct>).
type Call struct {
	Method string
	Params []any
}

// parser reads one call from an xml.Decoder, counting what the limits bound.
type parser struct {
	d      *xml.Decoder
	values int
}

// ParseCall reads one XML-RPC methodCall from b, as XML-RPC clients send it (Python's
// xmlrpc.client, OCaml's rpclib Xmlrpc.string_of_call): an optional XML declaration, no DTD,
// UTF-8, values at most MaxDepth deep and MaxValues in all, nothing but white space and comments
// after </methodCall>. Its errors wrap ErrSyntax, say where (a byte offset) and quote no more of
// the input than an element name cut to 32 bytes.
func ParseCall(b []byte) (*Call, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	// No CharsetReader: a declared encoding other than UTF-8 is an error. No Entity map: only
	// XML's five entities and character references are expanded.
	p := &parser{d: d}
	c, err := p.call()
	if err != nil {
		// The decoder's own errors quote names from the input: keep their start only.
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			err = fmt.Errorf("XML syntax error on line %d: %s", se.Line, clipN(se.Msg, 64))
		}
		return nil, fmt.Errorf("%w: at byte %d: %w", ErrSyntax, d.InputOffset(), err)
	}
	return c, nil
}

// next returns the next token that is not a comment, the XML declaration or white space
// between elements. Character data other than white space is returned as is.
func (p *parser) next() (xml.Token, error) {
	for {
		tok, err := p.d.Token()
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.Comment:
			continue
		case xml.ProcInst:
			if t.Target == "xml" {
				continue
			}
			return nil, errors.New("unexpected processing instruction")
		case xml.Directive:
			return nil, errors.New("DTDs and other directives are not accepted")
		case xml.CharData:
			if isSpace(t) {
				continue
			}
			return t, nil
		default:
			return tok, nil
		}
	}
}

// open reads the start of element name.
func (p *parser) open(name string) error {
	tok, err := p.next()
	if err != nil {
		return err
	}
	s, ok := tok.(xml.StartElement)
	if !ok || s.Name.Space != "" || s.Name.Local != name {
		return fmt.Errorf("want <%s>, found %s", name, describe(tok))
	}
	return nil
}

// close reads the end of the element open (the decoder checks it is that element's).
func (p *parser) close() error {
	tok, err := p.next()
	if err != nil {
		return err
	}
	if _, ok := tok.(xml.EndElement); !ok {
		return fmt.Errorf("want an end tag, found %s", describe(tok))
	}
	return nil
}

// text reads character data up to the end of the element open; nested elements are errors.
func (p *parser) text() (string, error) {
	var sb strings.Builder
	for {
		tok, err := p.d.Token()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			sb.Write(t)
		case xml.Comment:
		case xml.EndElement:
			return sb.String(), nil
		default:
			return "", fmt.Errorf("want text, found %s", describe(tok))
		}
	}
}

func (p *parser) call() (*Call, error) {
	if err := p.open("methodCall"); err != nil {
		return nil, err
	}
	if err := p.open("methodName"); err != nil {
		return nil, err
	}
	name, err := p.text()
	if err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if name == "" || len(name) > MaxMethodName {
		return nil, fmt.Errorf("method name of %d bytes (1 to %d allowed)", len(name), MaxMethodName)
	}
	c := &Call{Method: name}
	tok, err := p.next()
	if err != nil {
		return nil, err
	}
	if s, ok := tok.(xml.StartElement); ok && s.Name.Space == "" && s.Name.Local == "params" {
		if c.Params, err = p.params(); err != nil {
			return nil, err
		}
		if err := p.close(); err != nil { // </methodCall>
			return nil, err
		}
	} else if _, ok := tok.(xml.EndElement); !ok { // </methodCall> right after the name
		return nil, fmt.Errorf("want <params>, found %s", describe(tok))
	}
	switch tok, err := p.next(); {
	case err == io.ErrUnexpectedEOF:
		return c, nil
	case err != nil:
		return nil, err
	default:
		return nil, fmt.Errorf("found %s after </methodCall>", describe(tok))
	}
}

// params reads the params of <params> up to and including </params>.
func (p *parser) params() ([]any, error) {
	params := []any{}
	for {
		tok, err := p.next()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return params, nil
		case xml.StartElement:
			if t.Name.Space != "" || t.Name.Local != "param" {
				return nil, fmt.Errorf("want <param>, found %s", describe(tok))
			}
			if err := p.open("value"); err != nil {
				return nil, err
			}
			v, err := p.value(1)
			if err != nil {
				return nil, err
			}
			if err := p.close(); err != nil { // </param>
				return nil, err
			}
			params = append(params, v)
		default:
			return nil, fmt.Errorf("want <param>, found %s", describe(tok))
		}
	}
}

// value reads the contents of a <value> already open, and its end tag.
func (p *parser) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("values nested deeper than %d", MaxDepth)
	}
	if p.values++; p.values > MaxValues {
		return nil, fmt.Errorf("more than %d values", MaxValues)
	}
	// Untyped text is a string; white space followed by an element is that element's value.
	var text []byte
	for {
		tok, err := p.d.Token()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.CharData:
			text = append(text, t...)
		case xml.Comment:
		case xml.EndElement:
			return string(text), nil
		case xml.StartElement:
			if !isSpace(text) {
				return nil, errors.New("text and an element in one <value>")
			}
			v, err := p.typed(t, depth)
			if err != nil {
				return nil, err
			}
			return v, p.close() // </value>
		default:
			return nil, fmt.Errorf("unexpected %s in <value>", describe(tok))
		}
	}
}

// typed reads the element s, open, that types a value, and its end tag.
func (p *parser) typed(s xml.StartElement, depth int) (any, error) {
	if s.Name.Space != "" {
		return nil, fmt.Errorf("unknown value type %s", describe(s))
	}
	switch s.Name.Local {
	case "nil":
		if err := p.close(); err != nil {
			return nil, err
		}
		return nil, nil
	case "array":
		return p.array(depth)
	case "struct":
		return p.structure(depth)
	}
	txt, err := p.text()
	if err != nil {
		return nil, err
	}
	switch s.Name.Local {
	case "string", "dateTime.iso8601":
		return txt, nil
	case "int", "i4", "i8":
		bits := 64
		if s.Name.Local == "i4" {
			bits = 32
		}
		n, err := strconv.ParseInt(strings.TrimSpace(txt), 10, bits)
		if err != nil {
			return nil, fmt.Errorf("<%s> is not an integer of %d bits", s.Name.Local, bits)
		}
		return n, nil
	case "boolean":
		switch strings.TrimSpace(txt) {
		case "1":
			return true, nil
		case "0":
			return false, nil
		}
		return nil, errors.New("<boolean> is neither 0 nor 1")
	case "double":
		f, err := strconv.ParseFloat(strings.TrimSpace(txt), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errors.New("<double> is not a finite number")
		}
		return f, nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(strings.Map(dropSpace, txt))
		if err != nil {
			return nil, errors.New("<base64> is not base64")
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown value type %s", describe(s))
}

// array reads <data> and its values up to and including </array>.
func (p *parser) array(depth int) (any, error) {
	if err := p.open("data"); err != nil {
		return nil, err
	}
	vs := []any{}
	for {
		tok, err := p.next()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.EndElement: // </data>
			return vs, p.close() // </array>
		case xml.StartElement:
			if t.Name.Space != "" || t.Name.Local != "value" {
				return nil, fmt.Errorf("want <value>, found %s", describe(tok))
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		default:
			return nil, fmt.Errorf("want <value>, found %s", describe(tok))
		}
	}
}

// structure reads members up to and including </struct>. A name given twice is an error.
func (p *parser) structure(depth int) (any, error) {
	m := map[string]any{}
	for {
		tok, err := p.next()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return m, nil
		case xml.StartElement:
			if t.Name.Space != "" || t.Name.Local != "member" {
				return nil, fmt.Errorf("want <member>, found %s", describe(tok))
			}
			if err := p.open("name"); err != nil {
				return nil, err
			}
			name, err := p.text()
			if err != nil {
				return nil, err
			}
			if _, dup := m[name]; dup {
				return nil, errors.New("a struct names a member twice")
			}
			if err := p.open("value"); err != nil {
				return nil, err
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if err := p.close(); err != nil { // </member>
				return nil, err
			}
			m[name] = v
		default:
			return nil, fmt.Errorf("want <member>, found %s", describe(tok))
		}
	}
}

func isSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func dropSpace(r rune) rune {
	if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
		return -1
	}
	return r
}

// describe names a token for an error, quoting at most 32 bytes of an element's name and
// nothing of character data.
func describe(tok xml.Token) string {
	switch t := tok.(type) {
	case xml.StartElement:
		return "<" + clip(t.Name.Local) + ">"
	case xml.EndElement:
		return "</" + clip(t.Name.Local) + ">"
	case xml.CharData:
		return "text"
	default:
		return fmt.Sprintf("%T", tok)
	}
}

// clip cuts s to at most 32 bytes, on a rune boundary, for quoting in an error.
func clip(s string) string { return clipN(s, 32) }

// clipN cuts s to at most n bytes, on a rune boundary, marking the cut with "…".
func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// appendResponse appends an xapi-idl answer (rpclib's Xmlrpc.string_of_response): a
// methodResponse whose one param is the struct {Status: "Success", Value: v} or, when failed,
// {Status: "Failure", ErrorDescription: v}.
func appendResponse(b []byte, ok bool, v any) []byte {
	b = append(b, `<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>Status</name>`...)
	if ok {
		b = append(b, `<value>Success</value></member><member><name>Value</name>`...)
	} else {
		b = append(b, `<value>Failure</value></member><member><name>ErrorDescription</name>`...)
	}
	b = appendValue(b, v)
	return append(b, `</member></struct></value></param></params></methodResponse>`...)
}

// appendValue appends v, of one of the types of Call's params, as an XML-RPC <value>.
// Strings are written as typed <string> elements with XML escapes (a newline as &#xA;); a
// NaN or infinite float64, which XML-RPC cannot carry, is written as 0.
func appendValue(b []byte, v any) []byte {
	b = append(b, "<value>"...)
	switch x := v.(type) {
	case nil:
		b = append(b, "<nil/>"...)
	case string:
		b = append(b, "<string>"...)
		b = appendEscaped(b, x)
		b = append(b, "</string>"...)
	case int64:
		b = append(b, "<int>"...)
		b = strconv.AppendInt(b, x, 10)
		b = append(b, "</int>"...)
	case bool:
		if x {
			b = append(b, "<boolean>1</boolean>"...)
		} else {
			b = append(b, "<boolean>0</boolean>"...)
		}
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			x = 0
		}
		b = append(b, "<double>"...)
		b = strconv.AppendFloat(b, x, 'f', -1, 64)
		b = append(b, "</double>"...)
	case []byte:
		b = append(b, "<base64>"...)
		b = base64.StdEncoding.AppendEncode(b, x)
		b = append(b, "</base64>"...)
	case []any:
		b = append(b, "<array><data>"...)
		for _, e := range x {
			b = appendValue(b, e)
		}
		b = append(b, "</data></array>"...)
	case map[string]any:
		b = append(b, "<struct>"...)
		for _, k := range slices.Sorted(maps.Keys(x)) {
			b = append(b, "<member><name>"...)
			b = appendEscaped(b, k)
			b = append(b, "</name>"...)
			b = appendValue(b, x[k])
			b = append(b, "</member>"...)
		}
		b = append(b, "</struct>"...)
	default:
		panic(fmt.Sprintf("rrddrpc: no XML-RPC form for %T", v))
	}
	return append(b, "</value>"...)
}

// appendEscaped appends s as XML character data. Characters XML cannot carry (control
// characters other than tab, newline and carriage return; invalid UTF-8) become U+FFFD.
func appendEscaped(b []byte, s string) []byte {
	var buf bytes.Buffer
	xml.EscapeText(&buf, []byte(s))
	return append(b, buf.Bytes()...)
}
