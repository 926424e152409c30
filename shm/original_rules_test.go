package shm

import (
	"maps"
	"strings"
	"testing"
)

// The rules of the original Cantal agent for a .meta file (cantal_values' Metadata::read and
// read_data, the agent's Key::from_json), one test each: an entry the original drops is dropped
// here and reported in Layout.Skipped, and the rest of the file is read (issue 35 item 3).

type ruleEntry struct {
	kind   Kind
	off    int
	labels map[string]string
	line   int
}

func checkLayout(t *testing.T, meta string, want []ruleEntry, size int, skipped ...string) {
	t.Helper()
	l, err := ParseMeta("m", []byte(meta))
	if err != nil {
		t.Fatalf("ParseMeta(%q): %v; the original reads this file", meta, err)
	}
	if l.Size != size {
		t.Errorf("Size = %d; want %d", l.Size, size)
	}
	if len(l.Entries) != len(want) {
		t.Fatalf("entries %+v; want %+v", l.Entries, want)
	}
	for i, w := range want {
		e := l.Entries[i]
		if e.Kind != w.kind || e.Offset != w.off || e.Line != w.line || !maps.Equal(e.Labels, w.labels) || e.Labels == nil {
			t.Errorf("entry %d = %+v; want %+v", i, e, w)
		}
	}
	if strings.Join(l.Skipped, "|") != strings.Join(skipped, "|") {
		t.Errorf("Skipped = %q; want %q", l.Skipped, skipped)
	}
	for _, s := range l.Skipped {
		checkErrorText(t, s)
	}
}

// Python's Counter(metric="x", shard=1): the original's Key::from_json refuses a non-string
// value, so that entry is dropped; the next one is read.
func TestMetaNonStringLabelValueDropsOnlyThatEntry(t *testing.T) {
	checkLayout(t, "counter 8: {\"metric\": \"x\", \"shard\": 1}\ncounter 8: {\"metric\": \"y\"}\n",
		[]ruleEntry{{KindCounter, 8, map[string]string{"metric": "y"}, 2}}, 16,
		"m:1: a label value is not a string")
}

// Python's Counter(): {} gives a series with only the agent's labels, as in the original.
func TestMetaEmptyLabelObjectIsReadWithNoLabels(t *testing.T) {
	checkLayout(t, "counter 8: {}\nlevel 8 signed: {\"metric\": \"q\"}\n",
		[]ruleEntry{{KindCounter, 0, map[string]string{}, 1}, {KindLevel, 8, map[string]string{"metric": "q"}, 2}}, 16)
}

// Two entries with the same label set: the original's tip keeps the last one's value.
func TestMetaDuplicateLabelSetLastWins(t *testing.T) {
	checkLayout(t, "counter 8: {\"a\": \"b\", \"c\": \"d\"}\nlevel 8 signed: {\"c\": \"d\", \"a\": \"b\"}\ncounter 8: {}\ncounter 8: {}\n",
		[]ruleEntry{{KindLevel, 8, map[string]string{"a": "b", "c": "d"}, 2}, {KindCounter, 24, map[string]string{}, 4}}, 32,
		"m:1: same labels as line 2, which is read instead", "m:3: same labels as line 4, which is read instead")
}

// A key twice in one object: rustc_serialize's object keeps the last value.
func TestMetaDuplicateJSONKeyLastWins(t *testing.T) {
	checkLayout(t, "counter 8: {\"a\": \"b\", \"\\u0061\": \"c\"}\ncounter 8: {\"k\": 1, \"k\": \"v\"}\ncounter 8: {\"k\": \"w\", \"k\": [1]}\n",
		[]ruleEntry{{KindCounter, 0, map[string]string{"a": "c"}, 1}, {KindCounter, 8, map[string]string{"k": "v"}, 2}}, 24,
		"m:3: a label value is not a string")
}

// Arrays and nested objects as label values, and metadata that is not an object at all.
func TestMetaArraysAndNestedObjectsDropTheEntry(t *testing.T) {
	checkLayout(t, "counter 8: {\"a\": [\"b\", {\"c\": null}]}\ncounter 8: {\"a\": {\"b\": \"c\"}}\ncounter 8: [\"a\"]\ncounter 8: \"a\"\ncounter 8: {\"a\": true, \"b\": -1.5e3}\ncounter 8: {\"ok\": \"1\"}\n",
		[]ruleEntry{{KindCounter, 40, map[string]string{"ok": "1"}, 6}}, 48,
		"m:1: a label value is not a string", "m:2: a label value is not a string",
		"m:3: metadata is not a JSON object", "m:4: metadata is not a JSON object",
		"m:5: a label value is not a string")
}

// The original reads any state over 8 bytes: state 12 is 8 bytes of time and 4 of text.
func TestMetaStateOverEightBytesIsRead(t *testing.T) {
	checkLayout(t, "state 12: {\"s\": \"1\"}\ncounter 8: {\"c\": \"1\"}\n",
		[]ruleEntry{{KindState, 0, map[string]string{"s": "1"}, 1}, {KindCounter, 12, map[string]string{"c": "1"}, 2}}, 20)
	l, _ := ParseMeta("m", []byte("state 12: {\"s\": \"1\"}\n"))
	values := []byte{5, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd'}
	if since, text := l.Entries[0].State(values); since != 5 || string(text) != "abcd" {
		t.Errorf("State = %d %q; want 5 abcd", since, text)
	}
}

// state 8, counter 0 and pad with JSON: read there (skipped, pad ignored after its size).
func TestMetaStateEightCounterZeroAndPadWithJSONKeepTheirPlace(t *testing.T) {
	checkLayout(t, "state 8: {\"s\": \"1\"}\ncounter 0: {\"c\": \"0\"}\npad 8: {\"p\": \"1\"}\npad 4 x\ncounter 8: {\"c\": \"1\"}\n",
		[]ruleEntry{{KindCounter, 20, map[string]string{"c": "1"}, 5}}, 28,
		"m:1: state of 8 bytes or less is not read", "m:2: counter of a size other than 8 is not read")
}

// Parameters after a counter's or state's size, or a level's kind, are ignored there.
func TestMetaExtraParametersAreIgnored(t *testing.T) {
	checkLayout(t, "counter 8 x: {\"a\": \"1\"}\nstate 16 x: {\"a\": \"2\"}\nlevel 8 signed extra: {\"a\": \"3\"}\n",
		[]ruleEntry{{KindCounter, 0, map[string]string{"a": "1"}, 1}, {KindState, 8, map[string]string{"a": "2"}, 2}, {KindLevel, 24, map[string]string{"a": "3"}, 3}}, 32)
}

// Lines ending in CR, CRLF files and empty files are read there (it trims each line).
func TestMetaCRLFAndEmptyFilesAreRead(t *testing.T) {
	checkLayout(t, "counter 8: {\"a\": \"b\"}\r\ncounter 8: {\"a\": \"c\"}\r", []ruleEntry{
		{KindCounter, 0, map[string]string{"a": "b"}, 1}, {KindCounter, 8, map[string]string{"a": "c"}, 2}}, 16)
	checkLayout(t, "", nil, 0)
}

// A cleared state (time 0) keeps its text there.
func TestMetaStateWithTimeZeroKeepsItsText(t *testing.T) {
	l, err := ParseMeta("m", []byte("state 16: {\"s\": \"1\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	values := append(make([]byte, 8), "gone\x00xyz"...)
	if since, text := l.Entries[0].State(values); since != 0 || string(text) != "gone" {
		t.Errorf("State = %d %q; want 0 gone", since, text)
	}
}

// What still refuses the file there refuses it here: a line that is not TYPE SIZE, invalid
// JSON, a blank line (its own line, not a trailing one), "level" without a kind.
func TestMetaWhatTheOriginalRefusesIsRefused(t *testing.T) {
	for _, meta := range []string{
		"counter 8: {\"a\": \"b\"}\n\ncounter 8: {}\n",
		"counter 8: {\"a\": \"b\",}\n",
		"counter: {}\n",
		"level 8: {}\n",
		"counter 8: {\"a\" \"b\"}\n",
	} {
		if l, err := ParseMeta("m", []byte(meta)); err == nil {
			t.Errorf("ParseMeta(%q) = %+v; want an error, as the original", meta, l)
		}
	}
}

// A hostile file of many unreadable entries gives a bounded list of problems.
func TestMetaSkippedListIsBounded(t *testing.T) {
	meta := strings.Repeat("counter 0: {}\n", 10000)
	l, err := ParseMeta("m", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Skipped) != maxSkipped+1 || l.Skipped[maxSkipped] != "m: 9936 more entries not read" {
		t.Errorf("Skipped has %d lines, last %q", len(l.Skipped), l.Skipped[len(l.Skipped)-1])
	}
}
