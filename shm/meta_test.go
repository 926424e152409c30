package shm

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestParseMetaValid(t *testing.T) {
	type ent struct {
		kind   Kind
		off    int
		size   int
		labels map[string]string
		line   int
	}
	tests := []struct {
		name    string
		meta    string
		want    []ent
		size    int
		skipped []string
	}{
		{"seed example", "counter 8: {\"metric\": \"requests.number\"}\ncounter 8: {\"metric\": \"requests.duration\", \"unit\": \"ms\"}\npad 48\nstate 64: {\"value\": \"request.sql.request\"}\n",
			[]ent{
				{KindCounter, 0, 8, map[string]string{"metric": "requests.number"}, 1},
				{KindCounter, 8, 8, map[string]string{"metric": "requests.duration", "unit": "ms"}, 2},
				{KindState, 64, 64, map[string]string{"value": "request.sql.request"}, 4},
			}, 128, nil},
		{"levels, two spaces after colon", "level 8 signed:  {\"metric\": \"memoryusage\"}\nlevel 8 float: {\"m\": \"f\"}\n",
			[]ent{
				{KindLevel, 0, 8, map[string]string{"metric": "memoryusage"}, 1},
				{KindFloat, 8, 8, map[string]string{"m": "f"}, 2},
			}, 16, nil},
		{"no final newline", "counter 8: {\"a\": \"b\"}",
			[]ent{{KindCounter, 0, 8, map[string]string{"a": "b"}, 1}}, 8, nil},
		{"compact json, unsorted keys", "counter 8: {\"z\":\"1\",\"a\":\"2\"}\n",
			[]ent{{KindCounter, 0, 8, map[string]string{"z": "1", "a": "2"}, 1}}, 8, nil},
		{"escapes", `counter 8: {"k\u00e9": "\ud83d\ude00\n\t\"\\\/\b\f\r", "\u003c": "\ud800"}` + "\n",
			[]ent{{KindCounter, 0, 8, map[string]string{"ké": "😀\n\t\"\\/\b\f\r", "<": "\uFFFD"}, 1}}, 8, nil},
		{"utf-8 and tabs", "counter 8:\t{ \"métrique\" :\t\"значение\" }\t\n",
			[]ent{{KindCounter, 0, 8, map[string]string{"métrique": "значение"}, 1}}, 8, nil},
		{"smallest and largest state", "state 9: {\"a\": \"1\"}\nstate 65535: {\"a\": \"2\"}\n",
			[]ent{
				{KindState, 0, 9, map[string]string{"a": "1"}, 1},
				{KindState, 9, 65535, map[string]string{"a": "2"}, 2},
			}, 65544, nil},
		{"skipped entries keep their bytes", "level 8 unsigned: {\"a\": \"1\"}\nhistogram 24: {\"a\": \"2\"}\ncounter 4: {\"a\": \"3\"}\nlevel 4 signed: {\"a\": \"4\"}\nlevel 8 weird: {\"a\": \"5\"}\ncounter 8: {\"a\": \"9\"}\n",
			[]ent{{KindCounter, 48, 8, map[string]string{"a": "9"}, 6}}, 56, []string{
				"m:1: level 8 unsigned is not read",
				"m:2: unknown type",
				"m:3: counter of a size other than 8 is not read",
				"m:4: level of a size other than 8 is not read",
				"m:5: level with an unknown parameter is not read",
			}},
		{"same label values under different keys", "counter 8: {\"a\": \"b\"}\ncounter 8: {\"b\": \"a\"}\ncounter 8: {\"a\": \"b\", \"c\": \"d\"}\n",
			[]ent{
				{KindCounter, 0, 8, map[string]string{"a": "b"}, 1},
				{KindCounter, 8, 8, map[string]string{"b": "a"}, 2},
				{KindCounter, 16, 8, map[string]string{"a": "b", "c": "d"}, 3},
			}, 24, nil},
		{"only padding", "pad 8\n", nil, 8, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseMeta("m", []byte(tt.meta))
			if err != nil {
				t.Fatalf("ParseMeta(%q) error: %v", tt.meta, err)
			}
			if l.Size != tt.size {
				t.Errorf("Size = %d; want %d", l.Size, tt.size)
			}
			if len(l.Entries) != len(tt.want) {
				t.Fatalf("got %d entries; want %d: %+v", len(l.Entries), len(tt.want), l.Entries)
			}
			for i, w := range tt.want {
				e := l.Entries[i]
				if e.Kind != w.kind || e.Offset != w.off || e.Size != w.size || e.Line != w.line || !maps.Equal(e.Labels, w.labels) {
					t.Errorf("entry %d = %+v; want %+v", i, e, w)
				}
			}
			if strings.Join(l.Skipped, "|") != strings.Join(tt.skipped, "|") {
				t.Errorf("Skipped = %q; want %q", l.Skipped, tt.skipped)
			}
		})
	}
}

func TestParseMetaErrors(t *testing.T) {
	tests := []struct {
		class, meta, want string
	}{
		{"blank line", "counter 8: {\"a\": \"b\"}\n\ncounter 8: {\"a\": \"c\"}\n", "m:2: empty line"},
		{"only newline", "\n", "m:1: empty line"},
		{"whitespace line", "counter 8: {\"a\": \"b\"}\n  \n", "m:2: empty line"},
		{"no size", "counter: {\"a\": \"b\"}\n", "m:1: expected TYPE SIZE [PARAM]: JSON or pad SIZE"},
		{"bad size", "counter x: {\"a\": \"b\"}\n", "m:1: counter: bad size"},
		{"negative size", "counter -8: {\"a\": \"b\"}\n", "m:1: counter: bad size"},
		{"huge size", "pad 99999999999\n", "m:1: pad: bad size"},
		{"oversize pad", "pad 65536\n", "m:1: pad: size out of range"},
		{"oversize state", "state 65536: {\"a\": \"b\"}\n", "m:1: state: size out of range 0..65535"},
		{"oversize unknown", "histogram 70000: {\"a\": \"b\"}\n", "m:1: entry of unknown type: size out of range"},
		{"level without kind", "level 8: {\"a\": \"b\"}\n", "m:1: level needs a parameter"},
		{"missing json", "counter 8\n", "m:1: counter has no JSON metadata"},
		{"missing json after colon", "counter 8:\n", "m:1: bad JSON at end of metadata: expected a value"},
		{"bad number", "counter 8: {\"a\": 01}\n", "m:1: bad JSON at column 9"},
		{"bad word", "counter 8: {\"a\": nul}\n", "m:1: bad JSON at column 8: expected a value"},
		{"unclosed array", "counter 8: {\"a\": [1, 2}\n", "expected ',' or the end of an array or object"},
		{"too deep", "counter 8: " + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n", "nested deeper than 64"},
		{"error on later line", "counter 8: {\"a\": \"b\"}\npad 8\nstate 8: [\n", "m:3: bad JSON"},
		{"non-string key", "counter 8: {1: \"b\"}\n", "expected a string key"},
		{"trailing comma", "counter 8: {\"a\": \"b\",}\n", "expected a string key"},
		{"missing colon in object", "counter 8: {\"a\" \"b\"}\n", "column 7: expected ':' after a key"},
		{"missing comma", "counter 8: {\"a\": \"b\" \"c\": \"d\"}\n", "expected ',' or '}'"},
		{"trailing garbage", "counter 8: {\"a\": \"b\"} x\n", "trailing data after metadata"},
		{"two objects", "counter 8: {\"a\": \"b\"}{\"c\": \"d\"}\n", "trailing data"},
		{"unterminated string", "counter 8: {\"a\": \"b}\n", "unterminated string"},
		{"unterminated object", "counter 8: {\"a\": \"b\"\n", "expected ',' or '}'"},
		{"bad escape", "counter 8: {\"a\": \"\\x\"}\n", "column 10: bad escape"},
		{"bad unicode escape", "counter 8: {\"a\": \"\\u12G4\"}\n", "bad \\u escape"},
		{"short unicode escape", "counter 8: {\"a\": \"\\u12\"}\n", "bad \\u escape"},
		{"control character", "counter 8: {\"a\": \"b\tc\"}\n", "control character in string"},
		{"invalid utf-8", "counter 8: {\"a\": \"\xff\"}\n", "string is not valid UTF-8"},
		{"invalid utf-8 after escape", "counter 8: {\"a\": \"\\n\xff\"}\n", "string is not valid UTF-8"},
		{"multi-line json", "counter 8: {\"a\":\n\"b\"}\n", "m:1: bad JSON at end of metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			l, err := ParseMeta("m", []byte(tt.meta))
			if err == nil {
				t.Fatalf("ParseMeta(%q) = %+v; want error containing %q", tt.meta, l, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseMeta(%q) error = %q; want it to contain %q", tt.meta, err, tt.want)
			}
		})
	}
}

func TestAppendLabelsJSON(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"metric": "x"}, `{"metric": "x"}`},
		{map[string]string{"b": "2", "a": "1"}, `{"a": "1", "b": "2"}`},
		{map[string]string{"q": "\"\\\n\r\t\b\f\x01\x7f/"}, `{"q": "\"\\\n\r\t\b\f\u0001\u007f/"}`},
		{map[string]string{"é": "😀"}, `{"\u00e9": "\ud83d\ude00"}`},
	}
	for _, tt := range tests {
		keys := make([]string, 0, len(tt.labels))
		for k := range tt.labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		got := string(appendLabelsJSON(nil, keys, tt.labels))
		if got != tt.want {
			t.Errorf("appendLabelsJSON(%q) = %s; want %s", tt.labels, got, tt.want)
		}
		back, _, err := parseLabels([]byte(got))
		if err != nil || !maps.Equal(back, tt.labels) {
			t.Errorf("parseLabels(%s) = %q, %v; want %q", got, back, err, tt.labels)
		}
	}
}

// checkErrorText fails if a ParseMeta message could be quoting the file: no double quote, no
// byte outside printable ASCII (the agent shows these messages to people who may not read the
// file).
func checkErrorText(t *testing.T, msg string) {
	t.Helper()
	for _, c := range []byte(msg) {
		if c < 0x20 || c > 0x7e || c == '"' {
			t.Fatalf("message %q has a quote or a byte outside printable ASCII: is it quoting the file?", msg)
		}
	}
}

// TestParseMetaErrorsDoNotQuoteFile: ParseMeta's errors and skip reasons name lines, columns
// and the protocol's keywords, never what the file holds.
//
// Security finding 13.
func TestParseMetaErrorsDoNotQuoteFile(t *testing.T) {
	const secret = "S3cr3t"
	for _, meta := range []string{
		secret + "\n",
		secret + " 8: {\"a\": \"b\"}\n",
		"counter " + secret + ": {\"a\": \"b\"}\n",
		secret + " 70000: {\"a\": \"b\"}\n",
		secret + " 8\n",
		"counter 8: {\"" + secret + "\": 1}\n",
		"counter 8: {\"" + secret + "\" \"b\"}\n",
		"counter 8: {\"" + secret + "\": \"b\", \"" + secret + "\": 2}\n",
		"counter 8: " + secret + "\n",
		"counter 8: {\"a\": \"b\"} " + secret + "\n",
		"counter 8: {\"a\": \"\\" + secret + "\"}\n",
		"counter 8: {\"a\": \"b\" " + secret + "}\n",
		"level 8 " + secret + ": {\"a\": \"b\"}\ncounter 8 " + secret + ": {\"a\": \"c\"}\n" + secret + " 8: {\"a\": \"d\"}\n" +
			"level 8 signed " + secret + ": {\"a\": \"e\"}\nstate 16 " + secret + ": {\"a\": \"f\"}\n",
	} {
		l, err := ParseMeta("m", []byte(meta))
		var msgs []string
		if err != nil {
			msgs = append(msgs, err.Error())
		} else {
			msgs = l.Skipped
		}
		if len(msgs) == 0 {
			t.Errorf("ParseMeta(%q): no error and nothing skipped", meta)
		}
		for _, msg := range msgs {
			if strings.Contains(msg, "S3") || strings.Contains(msg, "cr3t") {
				t.Errorf("ParseMeta(%q): %q quotes the file", meta, msg)
			}
			checkErrorText(t, msg)
		}
	}
}
