package kfile

import (
	"encoding/binary"
	"slices"
	"testing"
)

func TestParseNumbers(t *testing.T) {
	if v, err := ParseUint([]byte("18446744073709551615")); err != nil || v != 1<<64-1 {
		t.Errorf("parseUint(max) = %d, %v", v, err)
	}
	for _, bad := range []string{"", "18446744073709551616", "1a", "-1", " 1"} {
		if _, err := ParseUint([]byte(bad)); err == nil {
			t.Errorf("parseUint(%q) = nil error", bad)
		}
	}
	if v, err := ParseInt([]byte("-9223372036854775808")); err != nil || v != -1<<63 {
		t.Errorf("parseInt(min) = %d, %v", v, err)
	}
	for _, bad := range []string{"9223372036854775808", "-9223372036854775809", "-", "+"} {
		if _, err := ParseInt([]byte(bad)); err == nil {
			t.Errorf("parseInt(%q) = nil error", bad)
		}
	}
	if v, err := ParseHex([]byte("fFfF")); err != nil || v != 0xffff {
		t.Errorf("parseHex = %x, %v", v, err)
	}
	for _, tc := range []struct {
		in   string
		want float64
	}{{"0.80", 0.8}, {"370.95", 370.95}, {"12", 12}, {"0.001", 0.001}} {
		if v, err := ParseDecimal([]byte(tc.in)); err != nil || v != tc.want {
			t.Errorf("parseDecimal(%q) = %v, %v; want %v", tc.in, v, err, tc.want)
		}
	}
}

func TestParseDirents(t *testing.T) {
	var b []byte
	for _, name := range []string{".", "..", "1", "self", "42", "0123", "99999", "1x"} {
		rec := make([]byte, (19+len(name)+1+7)&^7)
		binary.NativeEndian.PutUint16(rec[16:], uint16(len(rec)))
		copy(rec[19:], name)
		b = append(b, rec...)
	}
	if got := ParseDirents(b, nil); !slices.Equal(got, []int{1, 42, 99999}) {
		t.Errorf("parseDirents = %v", got)
	}
	// A truncated or corrupt buffer stops the parse instead of reading past it.
	if got := ParseDirents(b[:30], nil); len(got) > 1 {
		t.Errorf("parseDirents(truncated) = %v", got)
	}
}
