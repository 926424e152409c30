package kfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Errors the number parsers wrap.
var (
	ErrSyntax = errors.New("syntax error")
	ErrRange  = errors.New("value out of range")
)

// IndexByte is bytes.IndexByte.
func IndexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }

// IsSpace reports whether c separates fields of a kernel file.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Field returns the whitespace-separated field of b that starts at or after pos, and the
// position just after it. At the end of b it returns a nil Field.
func Field(b []byte, pos int) ([]byte, int) {
	for pos < len(b) && IsSpace(b[pos]) {
		pos++
	}
	start := pos
	for pos < len(b) && !IsSpace(b[pos]) {
		pos++
	}
	if start == pos {
		return nil, pos
	}
	return b[start:pos], pos
}

// NextLine returns the line of b starting at pos, without its newline, and the start of the
// next line.
func NextLine(b []byte, pos int) ([]byte, int) {
	if pos >= len(b) {
		return nil, len(b)
	}
	i := IndexByte(b[pos:], '\n')
	if i < 0 {
		return b[pos:], len(b)
	}
	return b[pos : pos+i], pos + i + 1
}

// ParseUint parses a decimal uint64.
func ParseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, ErrSyntax
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrSyntax
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, ErrRange
		}
		n = n*10 + d
	}
	return n, nil
}

// ParseInt parses a decimal int64 with an optional sign.
func ParseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	u, err := ParseUint(b)
	if err != nil {
		return 0, err
	}
	if neg {
		if u > 1<<63 {
			return 0, ErrRange
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, ErrRange
	}
	return int64(u), nil
}

// ParseHex parses a hexadecimal uint64 (no prefix).
func ParseHex(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 16 {
		return 0, ErrSyntax
	}
	var n uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, ErrSyntax
		}
		n = n<<4 | uint64(d)
	}
	return n, nil
}

// ParseDecimal parses a plain decimal fraction as the kernel prints it ("0.80", "370.95", "12"),
// without allocating.
func ParseDecimal(b []byte) (float64, error) {
	i := IndexByte(b, '.')
	if i < 0 {
		u, err := ParseUint(b)
		return float64(u), err
	}
	ip, frac := b[:i], b[i+1:]
	if len(ip) == 0 || len(frac) == 0 || len(frac) > 18 {
		return 0, ErrSyntax
	}
	u, err := ParseUint(ip)
	if err != nil {
		return 0, err
	}
	f, err := ParseUint(frac)
	if err != nil {
		return 0, err
	}
	return float64(u) + float64(f)/math.Pow10(len(frac)), nil
}

// ParseError describes a malformed line; it is built only on the failure path.
func ParseError(what string, line []byte, err error) error {
	const maxQuote = 80
	if len(line) > maxQuote {
		line = line[:maxQuote]
	}
	return fmt.Errorf("parse %s line %q: %w", what, line, err)
}

// ValidString returns b as a string with invalid UTF-8 replaced by U+FFFD.
func ValidString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// ParseIntValue parses a file holding one decimal integer, such as a sysctl or a sysfs
// attribute, surrounded by white space.
func ParseIntValue(b []byte) (int64, error) {
	v, err := ParseInt(bytes.TrimSpace(b))
	if err != nil {
		return 0, fmt.Errorf("parse value: %w", err)
	}
	return v, nil
}

// ParseBtime finds "btime N" (the boot time, unix seconds) in /proc/stat; both the machine scan
// and the process scan need it.
func ParseBtime(b []byte) (int64, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = NextLine(b, pos)
		if !bytes.HasPrefix(line, []byte("btime ")) {
			continue
		}
		v, err := ParseIntValue(line[len("btime "):])
		if err != nil {
			return 0, ParseError("/proc/stat", line, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("parse /proc/stat: no btime line")
}
