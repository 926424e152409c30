package procscan

import (
	"bytes"

	"github.com/cantal-go/cantal/internal/kfile"
)

// parseFlatKeyed parses the "key value" lines of cgroup files such as cpu.stat, memory.stat
// and cpuacct.stat, appending to dst. Keys alias b.
func parseFlatKeyed(b []byte, dst []kv) ([]kv, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		k, p := kfile.Field(line, 0)
		if k == nil {
			continue
		}
		f, p := kfile.Field(line, p)
		if extra, _ := kfile.Field(line, p); extra != nil {
			return dst, kfile.ParseError("cgroup stat", line, kfile.ErrSyntax)
		}
		v, err := kfile.ParseUint(f)
		if err != nil {
			return dst, kfile.ParseError("cgroup stat", line, err)
		}
		dst = append(dst, kv{Key: k, Val: v})
	}
	return dst, nil
}

// parseSingleValue parses a one-number cgroup file (memory.current, memory.usage_in_bytes,
// cpuacct.usage). ok is false for the word "max" (no limit).
func parseSingleValue(b []byte) (v uint64, ok bool, err error) {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("max")) {
		return 0, false, nil
	}
	v, err = kfile.ParseUint(b)
	if err != nil {
		return 0, false, kfile.ParseError("cgroup value", b, err)
	}
	return v, true, nil
}

// lookup returns the value of key in kvs.
func lookup(kvs []kv, key string) (uint64, bool) {
	for _, e := range kvs {
		if string(e.Key) == key {
			return e.Val, true
		}
	}
	return 0, false
}

// kv is a named value of a flat-keyed cgroup file; Key aliases the parsed buffer.
type kv struct {
	Key []byte
	Val uint64
}
