package series

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestKeyRoundTrip(t *testing.T) {
	for _, l := range []Labels{
		{"metric": "a"},
		{"metric": "x\"y\\z\n\x01", "pid": "12", "b": ""},
		{"ünï": "cödé", "a": "{}"},
	} {
		k := l.Key()
		got, err := ParseKey(k)
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", k, err)
		}
		if len(got) != len(l) {
			t.Fatalf("ParseKey(%q) = %v; want %v", k, got, l)
		}
		for name, v := range l {
			if got[name] != v {
				t.Errorf("ParseKey(%q)[%q] = %q; want %q", k, name, got[name], v)
			}
		}
	}
	if k := (Labels{"b": "2", "a": "1"}).Key(); k != `{"a":"1","b":"2"}` {
		t.Errorf("Key() = %s; want sorted compact JSON", k)
	}
}

func TestParseKeyRejects(t *testing.T) {
	for _, k := range []string{"", "[]", "null", `{"a":1}`} {
		if _, err := ParseKey(k); err == nil {
			t.Errorf("ParseKey(%q) = nil error; want error", k)
		}
	}
}

func TestKindText(t *testing.T) {
	for _, k := range []Kind{Counter, Level, Float, State} {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	if _, err := ParseKind("gauge"); err == nil {
		t.Error("ParseKind(gauge) succeeded; want error")
	}
}

func TestSampleJSON(t *testing.T) {
	s := Sample{Labels: Labels{"metric": "x"}, Kind: Counter, TS: 5, Bits: 7, Rate: 1.5, HasRate: true}
	b, _ := s.MarshalJSON()
	if want := `{"labels":{"metric":"x"},"kind":"counter","value":7,"ts":5,"rate":1.5}`; string(b) != want {
		t.Errorf("MarshalJSON = %s; want %s", b, want)
	}
	s = Sample{Labels: Labels{"metric": "s"}, Kind: State, TS: 5, Text: "a\"b", Since: 3}
	b, _ = s.MarshalJSON()
	if want := `{"labels":{"metric":"s"},"kind":"state","value":"a\"b","ts":5,"text":"a\"b","since":3}`; string(b) != want {
		t.Errorf("MarshalJSON = %s; want %s", b, want)
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, in := range []string{"plain", "q\"b\\s", "\x00\x01\n\t\x7f", "bad \xff\xfe utf8", "ünï ✓"} {
		b := AppendJSONString(nil, in)
		var out string
		if err := json.Unmarshal(b, &out); err != nil {
			t.Errorf("AppendJSONString(%q) = %s: not JSON: %v", in, b, err)
			continue
		}
		if utf8.ValidString(in) && out != in {
			t.Errorf("AppendJSONString(%q) round-trips to %q", in, out)
		}
	}
}

// FuzzParseKey: keys come back from history snapshots on disk; parsing never panics, and a
// parsed key's labels give back a key that parses to the same labels.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`{"metric":"a"}`, `{"a":"1","b":"\u00e9"}`, `{}`, `[]`, `{"a":1}`, "{\"a\":\"\xff\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		l, err := ParseKey(key)
		if err != nil {
			return
		}
		k2 := l.Key()
		l2, err := ParseKey(k2)
		if err != nil {
			t.Fatalf("Key() of parsed %q = %q does not parse: %v", key, k2, err)
		}
		if l2.Key() != k2 {
			t.Fatalf("key not stable: %q -> %q", k2, l2.Key())
		}
	})
}

// TestKeyAllocs: a key of up to 8 labels costs one allocation, its bytes (every new series
// makes one; the process scanner 8 per new process).
func TestKeyAllocs(t *testing.T) {
	l := Labels{"metric": "process.cpu.user_ms", "pid": "123456", "process": "cc1", "cgroup": "system.slice/runner-3.service"}
	if n := testing.AllocsPerRun(100, func() { _ = l.Key() }); n != 1 {
		t.Errorf("Labels.Key: %v allocations; want 1", n)
	}
}

// FuzzAppendJSONString: the writer that copies runs of plain bytes at once writes exactly what
// the byte-by-byte one (appendJSONStringRef, the version before it) writes, and valid JSON.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "tab\there\nnl", "\x00\x1f\x7f", "ünï", "\xff\xfe", "a\xe2\x82", "end\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := AppendJSONString(nil, s), appendJSONStringRef(nil, s)
		if string(got) != string(want) {
			t.Fatalf("AppendJSONString(%q) = %s; want %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendJSONString(%q) = %s: not JSON: %v", s, got, err)
		}
	})
}

func appendJSONStringRef(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
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
