package sysscan

import "bytes"

// parseFlatKeyed parses the "key value" lines of cgroup files such as cpu.stat, memory.stat
// and cpuacct.stat, appending to dst. Keys alias b.
func parseFlatKeyed(b []byte, dst []kv) ([]kv, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = nextLine(b, pos)
		k, p := field(line, 0)
		if k == nil {
			continue
		}
		f, p := field(line, p)
		if extra, _ := field(line, p); extra != nil {
			return dst, parseError("cgroup stat", line, errSyntax)
		}
		v, err := parseUint(f)
		if err != nil {
			return dst, parseError("cgroup stat", line, err)
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
	v, err = parseUint(b)
	if err != nil {
		return 0, false, parseError("cgroup value", b, err)
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
