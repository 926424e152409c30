package sysscan

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

var (
	errSyntax = errors.New("syntax error")
	errRange  = errors.New("value out of range")
)

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// field returns the whitespace-separated field of b that starts at or after pos, and the
// position just after it. At the end of b it returns a nil field.
func field(b []byte, pos int) ([]byte, int) {
	for pos < len(b) && isSpace(b[pos]) {
		pos++
	}
	start := pos
	for pos < len(b) && !isSpace(b[pos]) {
		pos++
	}
	if start == pos {
		return nil, pos
	}
	return b[start:pos], pos
}

// nextLine returns the line of b starting at pos, without its newline, and the start of the
// next line.
func nextLine(b []byte, pos int) ([]byte, int) {
	if pos >= len(b) {
		return nil, len(b)
	}
	i := indexByte(b[pos:], '\n')
	if i < 0 {
		return b[pos:], len(b)
	}
	return b[pos : pos+i], pos + i + 1
}

// parseUint parses a decimal uint64.
func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errSyntax
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errSyntax
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, errRange
		}
		n = n*10 + d
	}
	return n, nil
}

// parseInt parses a decimal int64 with an optional sign.
func parseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	u, err := parseUint(b)
	if err != nil {
		return 0, err
	}
	if neg {
		if u > 1<<63 {
			return 0, errRange
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, errRange
	}
	return int64(u), nil
}

// parseHex parses a hexadecimal uint64 (no prefix).
func parseHex(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 16 {
		return 0, errSyntax
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
			return 0, errSyntax
		}
		n = n<<4 | uint64(d)
	}
	return n, nil
}

// parseDecimal parses a plain decimal fraction as the kernel prints it ("0.80", "370.95", "12"),
// without allocating.
func parseDecimal(b []byte) (float64, error) {
	i := indexByte(b, '.')
	if i < 0 {
		u, err := parseUint(b)
		return float64(u), err
	}
	ip, frac := b[:i], b[i+1:]
	if len(ip) == 0 || len(frac) == 0 || len(frac) > 18 {
		return 0, errSyntax
	}
	u, err := parseUint(ip)
	if err != nil {
		return 0, err
	}
	f, err := parseUint(frac)
	if err != nil {
		return 0, err
	}
	return float64(u) + float64(f)/math.Pow10(len(frac)), nil
}

// parseError describes a malformed line; it is built only on the failure path.
func parseError(what string, line []byte, err error) error {
	const maxQuote = 80
	if len(line) > maxQuote {
		line = line[:maxQuote]
	}
	return fmt.Errorf("parse %s line %q: %w", what, line, err)
}
