// Package flagfile reads a YAML configuration file whose keys are a program's flags: every
// flag of a flag.FlagSet has the key of its name (without the dashes), and a value of the
// flag's type. Apply sets the flags the file names through their flag.Value, exactly as the
// command line would, so that a file and a command line can never disagree on what a
// setting means; Read opens the file under the rules that keep a file other users can
// change from configuring a root agent.
//
// Errors name the file and the line ("agent.yml:7: ...") and never quote a value from the
// file. They quote a key (at most 64 bytes of it): Apply is given only what Read accepted, a
// file that root or the agent's own user wrote.
//
// The package has no state; its functions are safe for concurrent use on distinct FlagSets.
package flagfile

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// List is implemented by a flag.Value that takes several values (a repeatable flag): in a
// file it may be given a YAML sequence, each item Set in turn, or one scalar. Reset empties it
// before a file's values, so that the file replaces the default instead of adding to it.
type List interface {
	flag.Value
	Reset()
}

// Error is a mistake in the file, at a line.
type Error struct {
	File string
	Line int // 1-based; 0 when the line is not known
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// Apply sets on fs every flag that the YAML document data (read from file, named in errors)
// gives a value. The document is a mapping of flag names to values; an empty document sets
// nothing. Names for which skip returns true are refused as unknown (flags that are not
// settings, such as --config itself). A key that is not a flag, a key given twice, a value of
// the wrong type (a list for a flag that takes one value, a string for a number or a
// duration, ...) or a value its flag refuses is an error; the first one is returned, and fs
// may then hold some of the file's values. On success it returns the line of each key set,
// for the caller's own checks of the values (see Error).
func Apply(fs *flag.FlagSet, file string, data []byte, skip func(name string) bool) (map[string]int, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty file
		}
		// yaml's messages may quote the text; keep only where it is.
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			fmt.Sscan(m[1], &line)
		}
		return nil, &Error{file, line, "not valid YAML"}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{file, extra.Line, "a second YAML document: want one mapping of settings"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{file, doc.Line, "want one mapping of settings"}
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{file, root.Line, "want a mapping of settings (key: value), not " + kindName(root)}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return nil, &Error{file, k.Line, "a key that is not a setting's name"}
		}
		f := fs.Lookup(k.Value)
		if f == nil || (skip != nil && skip(k.Value)) {
			return nil, &Error{file, k.Line, unknownKey(fs, k.Value, skip)}
		}
		if prev, ok := seen[k.Value]; ok {
			return nil, &Error{file, k.Line, fmt.Sprintf("%s given twice (first at line %d)", k.Value, prev)}
		}
		seen[k.Value] = k.Line
		if err := set(f, v); err != nil {
			return nil, &Error{file, v.Line, k.Value + ": " + err.Error()}
		}
	}
	return seen, nil
}

// set gives f the value of node v, checking its YAML type against the flag's.
func set(f *flag.Flag, v *yaml.Node) error {
	if l, ok := f.Value.(List); ok {
		switch {
		case v.Kind == yaml.SequenceNode:
			l.Reset()
			for _, it := range v.Content {
				if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
					return fmt.Errorf("want a list of strings, found %s at line %d", kindName(it), it.Line)
				}
				if err := l.Set(it.Value); err != nil {
					return errors.New("invalid value")
				}
			}
			return nil
		case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
			l.Reset()
			return nil
		case v.Kind == yaml.ScalarNode:
			l.Reset()
			if err := l.Set(v.Value); err != nil {
				return errors.New("invalid value")
			}
			return nil
		}
		return fmt.Errorf("want a list of strings, not %s", kindName(v))
	}
	if v.Kind != yaml.ScalarNode {
		return fmt.Errorf("want %s, not %s", want(f), kindName(v))
	}
	val := v.Value
	switch typeOf(f) {
	case "bool":
		if v.Tag != "!!bool" {
			return fmt.Errorf("want %s, not %s", want(f), kindName(v))
		}
		val = strings.ToLower(val)
	case "int", "float":
		if v.Tag != "!!int" && v.Tag != "!!float" {
			return fmt.Errorf("want %s, not %s", want(f), kindName(v))
		}
	case "duration":
		if v.Tag == "!!int" && val == "0" {
			break
		}
		if v.Tag != "!!str" {
			return fmt.Errorf("want %s such as 30s or 5m, not %s", want(f), kindName(v))
		}
	default: // a string: any scalar is its text, null is empty
		if v.Tag == "!!null" {
			val = ""
		} else if v.Tag == "!!binary" {
			return fmt.Errorf("want %s, not %s", want(f), kindName(v))
		}
	}
	if err := f.Value.Set(val); err != nil {
		// flag's own messages quote the value: say only what was wanted.
		return fmt.Errorf("invalid %s", want(f))
	}
	return nil
}

// typeOf is the kind of value a flag takes: bool, int, float, duration or string.
func typeOf(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "string"
	}
	switch g.Get().(type) {
	case bool:
		return "bool"
	case int, int64, uint, uint64:
		return "int"
	case float64:
		return "float"
	case time.Duration:
		return "duration"
	}
	return "string"
}

func want(f *flag.Flag) string {
	switch typeOf(f) {
	case "bool":
		return "true or false"
	case "int":
		return "an integer"
	case "float":
		return "a number"
	case "duration":
		return "a duration"
	}
	return "a string"
}

// kindName names a node's kind and type for a message, without its contents.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!null":
		return "null"
	case "!!bool":
		return "a boolean"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!str":
		return "a string"
	}
	return "a value of type " + strings.TrimPrefix(n.Tag, "!!")
}

// unknownKey is the message for a key that is not a setting: it quotes the key only when a
// flag's name is near it (the same with underscores as dashes, or with leading dashes).
func unknownKey(fs *flag.FlagSet, key string, skip func(string) bool) string {
	for _, cand := range []string{strings.ReplaceAll(key, "_", "-"), strings.TrimLeft(key, "-")} {
		if cand != key && fs.Lookup(cand) != nil && (skip == nil || !skip(cand)) {
			return fmt.Sprintf("unknown key %q; the setting is %q", key, cand)
		}
	}
	if fs.Lookup(key) != nil {
		return fmt.Sprintf("%s cannot be set in a configuration file", key)
	}
	if len(key) > 64 {
		key = key[:64] + "..."
	}
	return fmt.Sprintf("unknown key %q (keys are the flags' names, e.g. listen, cluster-name)", key)
}
