package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUnquote(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{`"plain" tail`, "plain", ""},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", ""},
		{`"\u00e9\ud83d\ude00"`, "é😀", ""},
		{`"\ud800x"`, "\uFFFDx", ""},
		{`"\ud800\u0041"`, "\uFFFDA", ""},
		{`"\udc00"`, "\uFFFD", ""},
		{`"abc`, "", "unterminated string"},
		{`"a\`, "", "unterminated string"},
		{`"\x"`, "", `bad escape '\x'`},
		{`"\u12G4"`, "", `bad \u escape`},
		{`"\ud800\u12"`, "", `bad \u escape`},
		{"\"a\tb\"", "", "control character in string"},
	} {
		got, next, err := Unquote([]byte(tc.in), 0)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Msg, tc.err) {
				t.Errorf("Unquote(%q) error = %v; want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Unquote(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		if tc.in[next-1] != '"' {
			t.Errorf("Unquote(%q) next = %d, not past the closing quote", tc.in, next)
		}
	}
}

// FuzzUnquote: agrees with encoding/json on every valid literal, never panics on others.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`, `"\"`, `"\x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) == 0 || s[0] != '"' {
			return
		}
		got, next, err := Unquote([]byte(s), 0)
		var want string
		jerr := json.Unmarshal([]byte(s), &want)
		if jerr == nil && utf8.ValidString(s) {
			if err != nil || next != len(strings.TrimRight(s, " \t\r\n")) {
				t.Fatalf("Unquote(%q) = %v, next %d; encoding/json accepts it", s, err, next)
			}
			if got != want {
				t.Fatalf("Unquote(%q) = %q; encoding/json says %q", s, got, want)
			}
		}
	})
}
