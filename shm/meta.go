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
	MinStateSize = 16    // smallest state: the 8-byte timestamp and 8 bytes of text
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
	// Skipped lists entries that are valid but cannot be read by this package (level 8
	// unsigned, unknown types, unsupported sizes), each as "file:line: reason". Their bytes
	// still occupy the layout.
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

// ParseMeta parses the contents of a .meta file. name is used in errors and Layout.Skipped,
// which read "name:line: reason". Reasons never quote the file (no type names, sizes, keys or
// characters read from it, only the keywords of the protocol and positions): the agent shows
// them to people who may not read the file.
//
// Every line is "TYPE SIZE [PARAM]: JSON" or "pad SIZE". The accepted entries are
// "counter 8", "level 8 signed", "level 8 float" and "state N" with 16 <= N <= 65535. Lines
// of "level 8 unsigned", of a known type with another size or parameter, or of an unknown type
// are skipped with a reason but keep their place in the layout; their SIZE must still be
// 1..65535 and their JSON valid. JSON is a single-line flat object of string keys and string
// values, with at least one key and no key twice; two entries with the same label set are an
// error.
//
// Lines end with "\n". The last line may lack it, because the Python client writes the file
// that way. Blank lines, carriage returns (CRLF files) and an empty file are errors.
func ParseMeta(name string, data []byte) (*Layout, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: empty meta file", name)
	}
	lay := &Layout{Entries: make([]Entry, 0, bytes.Count(data, []byte{'\n'})+1)}
	seen := make(map[string]int, cap(lay.Entries))
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
		if i := bytes.IndexByte(line, '\r'); i >= 0 {
			return nil, fail("carriage return in line (CRLF line endings are not allowed)")
		}
		if len(bytes.TrimSpace(line)) == 0 {
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
		if size < 1 || size > MaxStateSize {
			return nil, fail("%s: size out of range 1..%d", keyword(typ), MaxStateSize)
		}
		if typ == "pad" {
			if len(fields) > 2 || hasJSON {
				return nil, fail("pad takes only a size")
			}
			lay.Size += size
			continue
		}
		if !hasJSON {
			return nil, fail("%s has no JSON metadata (missing ':')", keyword(typ))
		}
		labels, err := parseLabels(js)
		if err != nil {
			return nil, fail("%v", err)
		}
		keys = keys[:0]
		for k := range labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		id := labelsKey(keys, labels)
		if prev, dup := seen[id]; dup {
			return nil, fail("duplicate metric: same labels as line %d", prev)
		}
		seen[id] = lineNo

		kind, skip, err := entryKind(typ, size, fields[2:])
		if err != nil {
			return nil, fail("%v", err)
		}
		if skip != "" {
			lay.Skipped = append(lay.Skipped, fmt.Sprintf("%s:%d: %s", name, lineNo, skip))
		} else {
			lay.Entries = append(lay.Entries, Entry{Kind: kind, Offset: lay.Size, Size: size, Labels: labels, Line: lineNo})
		}
		lay.Size += size
	}
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

// entryKind classifies a non-pad line. A non-empty skip is the reason the entry cannot be read.
func entryKind(typ string, size int, params [][]byte) (k Kind, skip string, err error) {
	param := ""
	if len(params) > 0 {
		param = string(params[0])
	}
	if len(params) > 1 {
		return 0, keyword(typ) + " with several parameters is not supported", nil
	}
	switch typ {
	case "counter":
		if param != "" {
			return 0, "counter with a parameter is not supported", nil
		}
		if size != 8 {
			return 0, "counter of a size other than 8 is not supported", nil
		}
		return KindCounter, "", nil
	case "level":
		if param == "" {
			return 0, "", errors.New("level needs a parameter: signed, unsigned or float")
		}
		switch {
		case size != 8:
			return 0, "level of a size other than 8 is not supported", nil
		case param == "signed":
			return KindLevel, "", nil
		case param == "float":
			return KindFloat, "", nil
		case param == "unsigned":
			return 0, "level 8 unsigned is not supported", nil
		}
		return 0, "level with an unknown parameter is not supported", nil
	case "state":
		if size < MinStateSize {
			return 0, "", fmt.Errorf("state: size out of range %d..%d", MinStateSize, MaxStateSize)
		}
		if param != "" {
			return 0, "state with a parameter is not supported", nil
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
