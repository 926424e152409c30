package rrddrpc

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParseCall: ParseCall never panics and fails only with ErrSyntax; a call it accepts
// survives writing and reparsing, and the server answers it with a response that parses as
// xapi-idl's, a Failure's ErrorDescription being [tag, message], and get_path answers a path
// in the plugin directory.
func FuzzParseCall(f *testing.F) {
	for _, seed := range []string{
		pyGetHeader, pyRegister, mlGetHeader, mlLocalRegister,
		param(`<value><struct><member><name>uid</name><value>../etc</value></member></struct></value>`),
		param(`<value><array><data><value><i4>1</i4></value><value><double>2.5</double></value><value><boolean>1</boolean></value><value><base64>aGk=</base64></value></data></array></value>`),
		`<methodCall><methodName>Plugin.get_path</methodName><params><param><value>p</value></param></params></methodCall>`,
		`<methodCall><methodName>Plugin.Local.register</methodName><params><param><value>p</value></param><param><value><array><data><value>Five_Seconds</value></data></array></value></param><param><value>V1</value></param></params></methodCall>`,
		`<methodCall><methodName>Plugin.deregister</methodName><params><param><value><struct><member><name>uid</name><value>p</value></member></struct></value></param></params></methodCall>`,
		`<?xml version="1.0"?><!DOCTYPE a><methodCall/>`,
		param(nested(MaxDepth)),
	} {
		f.Add([]byte(seed))
	}
	dir := filepath.Join(f.TempDir(), "metrics")
	if err := ensureDir(dir); err != nil {
		f.Fatal(err)
	}
	s := &Server{
		opt: Options{MaxPlugins: 8, NextReading: func() time.Duration { return time.Second }},
		dir: dir, log: slog.New(slog.DiscardHandler), plugins: map[string]*Plugin{},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCall(b)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("ParseCall error %v does not wrap ErrSyntax", err)
			}
			return
		}
		again, err := ParseCall(appendCall(nil, c))
		if err != nil {
			t.Fatalf("ParseCall(appendCall(%#v)): %v", c, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip = %#v; want %#v", again, c)
		}

		ok, v := s.dispatch(c)
		rok, rv, err := parseResponse(appendResponse(nil, ok, v))
		if err != nil || rok != ok || !reflect.DeepEqual(rv, v) {
			t.Fatalf("response to %#v = %v, %#v, %v; want %v, %#v", c, rok, rv, err, ok, v)
		}
		if !ok {
			if d, isList := v.([]any); !isList || len(d) != 2 {
				t.Fatalf("ErrorDescription %#v is not [tag, message]", v)
			}
			return
		}
		if c.Method == "Plugin.get_path" {
			p, _ := v.(string)
			if filepath.Dir(p) != dir || CheckUID(filepath.Base(p)) != nil {
				t.Fatalf("get_path = %q: not a sanitized name in %s", p, dir)
			}
		}
		if strings.HasSuffix(c.Method, "register") {
			for _, p := range s.Plugins() {
				if CheckUID(p.UID) != nil {
					t.Fatalf("registered uid %q", p.UID)
				}
			}
		}
		// get_path creates nothing but the directory.
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("plugin directory holds %v, %v", entries, err)
		}
	})
}
