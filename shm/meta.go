package shm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Kind is the type of a value in a .values file. Its numeric values are those of the agent's
// series.Kind, so series.Kind(k) converts it.
type Kind uint8

// The kinds of values the protocol defines and this package decodes.
const (
	KindCounter Kind = 1 // "counter 8": uint64, ever growing
	KindLevel   Kind = 2 // "level 8 signed": int64
	KindFloat   Kind = 3 // "level 8 float": float64
	KindState   Kind = 4 // "state N": 8-byte unix-ms timestamp, then UTF-8 text
)

// String returns counter, level, float or state.
func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindLevel:
		return "level"
	case KindFloat:
		return "float"
	case KindState:
		return "state"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Size limits of the protocol.
const (
	MinStateSize = 9     // smallest readable state: the 8-byte timestamp and 1 byte of text
	MaxStateSize = 65535 // largest state, pad or unknown entry
)

// Entry is one readable value of a Layout. An Entry is immutable after ParseMeta returns (but
// see Layout.ForgetLabels) and safe for concurrent use; Labels must not be modified.
type Entry struct {
	Kind   Kind
	Offset int // byte offset in the .values file
	Size   int // bytes: 8, or the whole state including its timestamp
	// Labels is the entry's JSON metadata.
	Labels map[string]string
	Line   int // 1-based line in the .meta file
}

// Layout is the parsed .meta file: the readable entries in file order and the number of bytes
// of the .values file they (with padding and skipped entries) cover. A Layout is immutable after
// ParseMeta returns, except for ForgetLabels, and safe for concurrent use.
type Layout struct {
	Entries []Entry
	// Size is the number of bytes of .values the layout covers; the values file must be at
	// least that long.
	Size int
	// Skipped lists entries that are valid but are not read (level 8 unsigned, unknown
	// types, unsupported sizes, labels that are not an object of strings, a label set given
	// again by a later line), each as "file:line: reason", at most maxSkipped of them and then
	// one line counting the rest. Their bytes still occupy the layout.
	Skipped []string
}

// ForgetLabels drops the labels of l's entries (Entry.Labels becomes nil), for the owner of a
// Reader that has taken the labels it needs and keeps l only to decode values: the agent holds
// a Layout per application for as long as it runs, and at 100k series their label maps were a
// tenth of its memory and a third of its garbage collector's marking. A Reader returns a Layout
// with Changed set once; it never returns it again after parsing another. ForgetLabels must
// not be called while another goroutine reads l's labels.
func (l *Layout) ForgetLabels() {
	for i := range l.Entries {
		l.Entries[i].Labels = nil
	}
}

// maxSkipped bounds Layout.Skipped: a hostile file of a million unreadable entries gives a
// bounded list of problems.
const maxSkipped = 64

// ParseMeta parses the contents of a .meta file. name is used in errors and Layout.Skipped,
// which read "name:line: reason". Reasons never quote the file (no type names, sizes, keys or
// characters read from it, only the keywords of the protocol and positions): the agent shows
// them to people who may not read the file.
//
// It reads the file entry by entry as the original Cantal agent does (cantal_values'
// Metadata::read, read_data and Key::from_json); the package documentation tables each rule.
// Every line, trimmed of surrounding whitespace (so CRLF files read), is "TYPE SIZE [PARAM]:
// JSON" or "pad SIZE" (anything after a pad's size is ignored). The readable entries are
// "counter 8", "level 8 signed", "level 8 float" and "state N" with 9 <= N <= 65535, with
// labels from a JSON object of string values. Other entries keep their place in the layout but
// are not read, each listed in Layout.Skipped with its reason: other types and sizes, labels
// that are not such an object, and an entry whose label set a later line gives again (the later
// one is read). A file is refused only for what makes its layout unknown: a line that is not
// TYPE SIZE, a size above 65535, invalid JSON, "level" without its kind, and a blank line. An
// empty file is an empty layout.
func ParseMeta(name string, data []byte) (*Layout, error) {
	lay := &Layout{Entries: make([]Entry, 0, bytes.Count(data, []byte{'\n'})+1)}
	seen := make(map[string]int, cap(lay.Entries)) // label set -> index in lay.Entries
	var dropped []bool                             // per entry: a later line has its labels
	var skipped []string
	nSkipped := 0
	skip := func(line int, reason string) {
		nSkipped++
		if len(skipped) < maxSkipped {
			skipped = append(skipped, fmt.Sprintf("%s:%d: %s", name, line, reason))
		}
	}
	var keys []string
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", name, lineNo, fmt.Sprintf(format, args...))
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return nil, fail("empty line")
		}
		head, js, hasJSON := bytes.Cut(line, []byte{':'})
		fields := bytes.Fields(head)
		if len(fields) < 2 {
			return nil, fail("expected TYPE SIZE [PARAM]: JSON or pad SIZE")
		}
		typ := string(fields[0])
		size, err := parseSize(fields[1])
		if err != nil {
			return nil, fail("%s: %v", keyword(typ), err)
		}
		if size > MaxStateSize {
			return nil, fail("%s: size out of range 0..%d", keyword(typ), MaxStateSize)
		}
		if typ == "pad" {
			lay.Size += size
			continue
		}
		if !hasJSON {
			return nil, fail("%s has no JSON metadata (missing ':')", keyword(typ))
		}
		labels, drop, err := parseLabels(js)
		if err != nil {
			return nil, fail("%v", err)
		}
		kind, why, err := entryKind(typ, size, fields[2:])
		if err != nil {
			return nil, fail("%v", err)
		}
		switch {
		case why != "":
			skip(lineNo, why)
		case drop != "":
			skip(lineNo, drop)
		default:
			keys = keys[:0]
			for k := range labels {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			id := labelsKey(keys, labels)
			if prev, dup := seen[id]; dup {
				dropped[prev] = true
				skip(lay.Entries[prev].Line, fmt.Sprintf("same labels as line %d, which is read instead", lineNo))
			}
			seen[id] = len(lay.Entries)
			lay.Entries = append(lay.Entries, Entry{Kind: kind, Offset: lay.Size, Size: size, Labels: labels, Line: lineNo})
			dropped = append(dropped, false)
		}
		lay.Size += size
	}
	if slices.Contains(dropped, true) {
		n := 0
		for i, e := range lay.Entries {
			if !dropped[i] {
				lay.Entries[n] = e
				n++
			}
		}
		clear(lay.Entries[n:])
		lay.Entries = lay.Entries[:n]
	}
	if nSkipped > len(skipped) {
		skipped = append(skipped, fmt.Sprintf("%s: %d more entries not read", name, nSkipped-len(skipped)))
	}
	lay.Skipped = skipped
	return lay, nil
}

// keyword returns typ if it is one of the protocol's types, for messages, which must not quote
// the file.
func keyword(typ string) string {
	switch typ {
	case "counter", "level", "state", "pad":
		return typ
	}
	return "entry of unknown type"
}

// entryKind classifies a non-pad line as the original agent does: the parameters after a
// counter's or state's size, and after a level's kind, are ignored. A non-empty skip is the
// reason the entry is not read.
func entryKind(typ string, size int, params [][]byte) (k Kind, skip string, err error) {
	param := ""
	if len(params) > 0 {
		param = string(params[0])
	}
	switch typ {
	case "counter":
		if size != 8 {
			return 0, "counter of a size other than 8 is not read", nil
		}
		return KindCounter, "", nil
	case "level":
		if param == "" {
			return 0, "", errors.New("level needs a parameter: signed, unsigned or float")
		}
		switch {
		case size != 8:
			return 0, "level of a size other than 8 is not read", nil
		case param == "signed":
			return KindLevel, "", nil
		case param == "float":
			return KindFloat, "", nil
		case param == "unsigned":
			return 0, "level 8 unsigned is not read", nil
		}
		return 0, "level with an unknown parameter is not read", nil
	case "state":
		if size < MinStateSize {
			return 0, "state of 8 bytes or less is not read", nil
		}
		return KindState, "", nil
	}
	return 0, "unknown type", nil
}

func parseSize(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 9 {
		return 0, errors.New("bad size")
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("bad size")
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
