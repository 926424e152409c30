package selector

import "unicode/utf8"

// MatchKey is Match for the series whose canonical key (series.Labels.Key: a JSON object of
// strings, sorted, without spaces) is key, read from the key itself instead of a map parsed
// from it: it allocates nothing. The registry keeps the labels of a series not written for a
// while only as its key, and a query that has to test many such series (a selector with no
// metric name, such as the process page's {pid="42"}) would otherwise parse each key into a
// map.
//
// ok is false when key is not in the plain form MatchKey reads: every name and value a
// double-quoted string without escapes, control characters or invalid UTF-8, no whitespace,
// nothing after the closing brace. The caller then parses the key (series.ParseKey) and calls
// Match. When ok is true, matched is what Match of the parsed key gives (a name given twice
// has its last value, as when parsing).
func (s *Selector) MatchKey(key string) (matched, ok bool) {
	if s == nil || len(s.eval) == 0 {
		return true, plainKey(key)
	}
	for i := range s.eval {
		m := &s.eval[i]
		v, ok := keyValue(key, m.Name)
		if !ok {
			return false, false
		}
		if !m.Matches(v) {
			return false, true
		}
	}
	return true, true
}

// plainKey reports whether key is in the form keyValue reads.
func plainKey(key string) bool {
	_, ok := keyValue(key, "")
	return ok
}

// keyValue returns the value of label name in the plain key key ("" when it has none; the last
// one when it has several); ok is false when key is not plain (see MatchKey). It reads the
// whole key every time, so that it never answers for a key that does not parse.
func keyValue(key, name string) (v string, ok bool) {
	if len(key) < 2 || key[0] != '{' || key[len(key)-1] != '}' {
		return "", false
	}
	i := 1
	if key[i] == '}' {
		return "", i == len(key)-1
	}
	for {
		k, n, ok := plainString(key, i)
		if !ok || n >= len(key) || key[n] != ':' {
			return "", false
		}
		val, n2, ok := plainString(key, n+1)
		if !ok || n2 >= len(key) {
			return "", false
		}
		if k == name {
			v = val
		}
		switch key[n2] {
		case ',':
			i = n2 + 1
		case '}':
			return v, n2 == len(key)-1
		default:
			return "", false
		}
	}
}

// plainString reads the double-quoted string at s[i:] and returns its content and the offset
// after its closing quote; ok is false when there is none, or it holds a backslash, a control
// character or invalid UTF-8.
func plainString(s string, i int) (str string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	ascii := true
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			str = s[i+1 : j]
			if !ascii && !utf8.ValidString(str) {
				return "", 0, false
			}
			return str, j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", 0, false
}
