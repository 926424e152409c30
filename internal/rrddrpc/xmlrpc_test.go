package rrddrpc

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// What Python's xmlrpc.client.dumps writes for rrdd.py's calls (captured from Python 3).
const (
	pyGetHeader = `<?xml version='1.0'?>
<methodCall>
<methodName>Plugin.get_header</methodName>
<params>
<param>
<value><nil/></value></param>
</params>
</methodCall>
`
	pyRegister = `<?xml version='1.0'?>
<methodCall>
<methodName>Plugin.register</methodName>
<params>
<param>
<value><struct>
<member>
<name>uid</name>
<value><string>xcp-rrdd-test</string></value>
</member>
<member>
<name>frequency</name>
<value><string>Five_Seconds</string></value>
</member>
</struct></value>
</param>
</params>
</methodCall>
`
)

// What rpclib's Xmlrpc.string_of_call writes for the OCaml library's calls: strings as bare
// <value> text, no white space.
const (
	mlGetHeader     = `<?xml version="1.0"?><methodCall><methodName>Plugin.get_header</methodName><params><param><value><nil/></value></param></params></methodCall>`
	mlLocalRegister = `<?xml version="1.0"?><methodCall><methodName>Plugin.Local.register</methodName><params><param><value><struct><member><name>protocol</name><value>V2</value></member><member><name>info</name><value>Five_Seconds</value></member><member><name>uid</name><value>xcp-rrdd-iostat</value></member></struct></value></param></params></methodCall>`
)

func TestParseCallClients(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Call
	}{
		{"python get_header", pyGetHeader, Call{"Plugin.get_header", []any{nil}}},
		{"python register", pyRegister, Call{"Plugin.register", []any{map[string]any{"uid": "xcp-rrdd-test", "frequency": "Five_Seconds"}}}},
		{"ocaml get_header", mlGetHeader, Call{"Plugin.get_header", []any{nil}}},
		{"ocaml Local.register", mlLocalRegister, Call{"Plugin.Local.register", []any{map[string]any{"uid": "xcp-rrdd-iostat", "info": "Five_Seconds", "protocol": "V2"}}}},
		{"no params", `<methodCall><methodName>x</methodName></methodCall>`, Call{"x", nil}},
		{"empty params", `<methodCall><methodName> x </methodName><params/></methodCall>`, Call{"x", []any{}}},
	} {
		got, err := ParseCall([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: ParseCall: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s: ParseCall = %#v; want %#v", tc.name, *got, tc.want)
		}
	}
}

func param(v string) string {
	return `<?xml version="1.0"?><methodCall><methodName>m</methodName><params><param>` + v + `</param></params></methodCall>`
}

func TestParseCallValues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`<value>plain</value>`, "plain"},
		{`<value></value>`, ""},
		{`<value/>`, ""},
		{`<value>  </value>`, "  "},
		{`<value><string/></value>`, ""},
		{`<value> <string>a&amp;b&#xA;</string> </value>`, "a&b\n"},
		{`<value><![CDATA[x<y]]></value>`, "x<y"},
		{`<value>a<!-- c -->b</value>`, "ab"},
		{`<value><int>-42</int></value>`, int64(-42)},
		{`<value><i4> 7 </i4></value>`, int64(7)},
		{`<value><i8>9223372036854775807</i8></value>`, int64(9223372036854775807)},
		{`<value><boolean>1</boolean></value>`, true},
		{`<value><boolean>0</boolean></value>`, false},
		{`<value><double>-1.5</double></value>`, -1.5},
		{`<value><double>1e3</double></value>`, 1000.0},
		{`<value><base64>aGk=</base64></value>`, []byte("hi")},
		{`<value><dateTime.iso8601>20260101T00:00:00</dateTime.iso8601></value>`, "20260101T00:00:00"},
		{`<value><nil/></value>`, nil},
		{`<value><array><data/></array></value>`, []any{}},
		{`<value><array><data><value>a</value><value><int>1</int></value></data></array></value>`, []any{"a", int64(1)}},
		{`<value><struct/></value>`, map[string]any{}},
		{`<value><struct><member><name>k</name><value><array><data><value>V2</value></data></array></value></member></struct></value>`,
			map[string]any{"k": []any{"V2"}}},
	} {
		c, err := ParseCall([]byte(param(tc.in)))
		if err != nil {
			t.Errorf("ParseCall(%s): %v", tc.in, err)
			continue
		}
		if len(c.Params) != 1 || !reflect.DeepEqual(c.Params[0], tc.want) {
			t.Errorf("ParseCall(%s) params = %#v; want [%#v]", tc.in, c.Params, tc.want)
		}
	}
}

func nested(depth int) string {
	return strings.Repeat(`<value><array><data>`, depth-1) + `<value>x</value>` + strings.Repeat(`</data></array></value>`, depth-1)
}

func TestParseCallRefuses(t *testing.T) {
	many := strings.Repeat(`<value>x</value>`, MaxValues)
	for _, tc := range []struct{ name, in string }{
		{"empty", ``},
		{"not xml", `DATASOURCES`},
		{"not a call", `<methodResponse/>`},
		{"doctype", `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><methodCall><methodName>m</methodName></methodCall>`},
		{"undefined entity", param(`<value>&a;</value>`)},
		{"processing instruction", `<?php x?><methodCall><methodName>m</methodName></methodCall>`},
		{"latin1", `<?xml version="1.0" encoding="ISO-8859-1"?><methodCall><methodName>m</methodName></methodCall>`},
		{"NUL", param(`<value>a&#0;b</value>`)},
		{"invalid utf-8", param("<value>\xff\xfe</value>")},
		{"trailing element", `<methodCall><methodName>m</methodName></methodCall><methodCall/>`},
		{"trailing text", `<methodCall><methodName>m</methodName></methodCall>junk`},
		{"truncated", `<methodCall><methodName>m</methodName><params><param><value>`},
		{"no method name", `<methodCall><params/></methodCall>`},
		{"empty method name", `<methodCall><methodName> </methodName></methodCall>`},
		{"long method name", `<methodCall><methodName>` + strings.Repeat("m", MaxMethodName+1) + `</methodName></methodCall>`},
		{"element in method name", `<methodCall><methodName><b/></methodName></methodCall>`},
		{"not a param", `<methodCall><methodName>m</methodName><params><value>x</value></params></methodCall>`},
		{"param without value", param(``)},
		{"two values in a param", param(`<value>a</value><value>b</value>`)},
		{"mixed content", param(`<value>a<string>b</string></value>`)},
		{"two types", param(`<value><string>a</string><string>b</string></value>`)},
		{"unknown type", param(`<value><float>1</float></value>`)},
		{"namespaced type", param(`<value><ex:nil xmlns:ex="http://ws.apache.org/xmlrpc/namespaces/extensions"/></value>`)},
		{"bad int", param(`<value><int>1.5</int></value>`)},
		{"i4 overflow", param(`<value><i4>2147483648</i4></value>`)},
		{"bad boolean", param(`<value><boolean>true</boolean></value>`)},
		{"infinite double", param(`<value><double>inf</double></value>`)},
		{"nan double", param(`<value><double>NaN</double></value>`)},
		{"bad base64", param(`<value><base64>!!</base64></value>`)},
		{"nil with content", param(`<value><nil>x</nil></value>`)},
		{"array without data", param(`<value><array><value>x</value></array></value>`)},
		{"duplicate member", param(`<value><struct><member><name>uid</name><value>a</value></member><member><name>uid</name><value>b</value></member></struct></value>`)},
		{"member without name", param(`<value><struct><member><value>a</value></member></struct></value>`)},
		{"mismatched end", param(`<value><string>a</int></value>`)},
		{"too deep", param(nested(MaxDepth + 1))},
		{"too many values", param(`<value><array><data>` + many + `</data></array></value>`)},
	} {
		c, err := ParseCall([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: ParseCall = %#v; want an error", tc.name, c)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: ParseCall error %v does not wrap ErrSyntax", tc.name, err)
		}
	}
	// The limits are not off by one.
	if _, err := ParseCall([]byte(param(nested(MaxDepth)))); err != nil {
		t.Errorf("ParseCall of values %d deep: %v", MaxDepth, err)
	}
	if _, err := ParseCall([]byte(param(`<value><array><data>` + many[len(`<value>x</value>`):] + `</data></array></value>`))); err != nil {
		t.Errorf("ParseCall of %d values: %v", MaxValues, err)
	}
}

// TestParseCallErrorsQuoteNothing: an error names an element (clipped) and an offset, never
// the text of the request.
func TestParseCallErrorsQuoteNothing(t *testing.T) {
	long := strings.Repeat("n", 200)
	for _, in := range []string{
		param(`<value>SECRET<string>x</string></value>`),
		param(`<value><int>SECRET</int></value>`),
		param(`<value><double>SECRET</double></value>`),
		`<methodCall><methodName>SECRET</methodName><` + long + `/></methodCall>`,
		`<methodCall><methodName>m</methodName></methodCall>SECRET`,
		param(`<value><string>x</` + long + `></value>`),
		param(`<value>&` + long + `;</value>`),
	} {
		_, err := ParseCall([]byte(in))
		if err == nil {
			t.Fatalf("ParseCall(%q) succeeded", in)
		}
		if msg := err.Error(); strings.Contains(msg, "SECRET") || strings.Contains(msg, long[:65]) {
			t.Errorf("ParseCall error %q quotes the request", msg)
		}
	}
}

// appendCall writes c as a client would (the inverse of ParseCall, for tests).
func appendCall(b []byte, c *Call) []byte {
	b = append(b, `<?xml version="1.0"?><methodCall><methodName>`...)
	b = appendEscaped(b, c.Method)
	b = append(b, `</methodName>`...)
	if c.Params == nil { // no <params> at all, which ParseCall tells from an empty one
		return append(b, `</methodCall>`...)
	}
	b = append(b, `<params>`...)
	for _, p := range c.Params {
		b = append(b, "<param>"...)
		b = appendValue(b, p)
		b = append(b, "</param>"...)
	}
	return append(b, `</params></methodCall>`...)
}

func TestRoundTrip(t *testing.T) {
	c := &Call{Method: "Plugin.Local.register", Params: []any{
		map[string]any{"uid": "a<b>&\"c'\n\t\r", "n": int64(-3), "f": 0.1, "ok": true, "no": false,
			"nil": nil, "bin": []byte{0, 1, 2, 255}, "list": []any{"x", []any{}, map[string]any{}}},
		"", int64(1) << 62, -1e300,
	}}
	got, err := ParseCall(appendCall(nil, c))
	if err != nil {
		t.Fatalf("ParseCall(appendCall(%#v)): %v", c, err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip = %#v; want %#v", got, c)
	}
}

// parseResponse reads a methodResponse as rpclib's Xmlrpc.response_of_string does: the one
// param must be the xapi-idl struct {Status, Value | ErrorDescription}.
func parseResponse(b []byte) (ok bool, v any, err error) {
	p := &parser{d: xml.NewDecoder(bytes.NewReader(b))}
	p.d.Strict = true
	for _, name := range []string{"methodResponse", "params", "param", "value"} {
		if err := p.open(name); err != nil {
			return false, nil, err
		}
	}
	r, err := p.value(1)
	if err != nil {
		return false, nil, err
	}
	m, isMap := r.(map[string]any)
	if !isMap || len(m) != 2 {
		return false, nil, fmt.Errorf("answer %#v is not a Status struct", r)
	}
	switch m["Status"] {
	case "Success":
		v, ok = m["Value"]
		if !ok {
			return false, nil, errors.New("Success without Value")
		}
		return true, v, nil
	case "Failure":
		v, ok = m["ErrorDescription"]
		if !ok {
			return false, nil, errors.New("Failure without ErrorDescription")
		}
		return false, v, nil
	}
	return false, nil, fmt.Errorf("Status %#v", m["Status"])
}

func TestAppendResponse(t *testing.T) {
	got := string(appendResponse(nil, true, Header))
	want := `<?xml version="1.0"?><methodResponse><params><param><value><struct>` +
		`<member><name>Status</name><value>Success</value></member>` +
		`<member><name>Value</name><value><string>DATASOURCES&#xA;</string></value></member>` +
		`</struct></value></param></params></methodResponse>`
	if got != want {
		t.Errorf("appendResponse(Success, header) =\n%s\nwant\n%s", got, want)
	}
	for _, tc := range []struct {
		ok bool
		v  any
	}{
		{true, 2.5}, {true, -1.0}, {true, nil}, {true, "/dev/shm/metrics/x"},
		{false, []any{"Rrdd_internal_error", "no uid argument"}},
	} {
		ok, v, err := parseResponse(appendResponse(nil, tc.ok, tc.v))
		if err != nil || ok != tc.ok || !reflect.DeepEqual(v, tc.v) {
			t.Errorf("parseResponse(appendResponse(%v, %#v)) = %v, %#v, %v", tc.ok, tc.v, ok, v, err)
		}
	}
}

// TestResponsesPythonReads: Python's xmlrpc.client reads the answers as rrdd.py's
// Proxy.parse_result expects them.
func TestResponsesPythonReads(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	var in bytes.Buffer
	for _, r := range [][]byte{
		appendResponse(nil, true, Header),
		appendResponse(nil, true, 1.25),
		appendResponse(nil, true, nil),
		appendResponse(nil, false, []any{"Invalid_protocol", "V3"}),
	} {
		in.Write(r)
		in.WriteByte(0)
	}
	script := `
import sys, xmlrpc.client
for doc in sys.stdin.read().split("\0")[:-1]:
    (r,), _ = xmlrpc.client.loads(doc)
    print(repr(r))
`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	want := `{'Status': 'Success', 'Value': 'DATASOURCES\n'}
{'Status': 'Success', 'Value': 1.25}
{'Status': 'Success', 'Value': None}
{'Status': 'Failure', 'ErrorDescription': ['Invalid_protocol', 'V3']}
`
	if string(out) != want {
		t.Errorf("python3 read\n%s\nwant\n%s", out, want)
	}
}
