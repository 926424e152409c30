package rrdd

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"
	"time"
)

// xcpRrddTimestamp decodes a v2 file's timestamp as current xcp-rrdd does (rrd_protocol_v2.ml
// since CA-391651): the 8 big-endian bytes at offset 23 (Cstruct.BE.get_uint64) through
// Int64.float_of_bits, seconds since the epoch.
func xcpRrddTimestamp(file []byte) float64 {
	const timestampStart = 11 + 4 + 4 + 4 // header, data CRC, metadata CRC, datasource count
	return math.Float64frombits(binary.BigEndian.Uint64(file[timestampStart : timestampStart+8]))
}

// TestWriterTimestampReadByXcpRrddRule: a file written by Writer carries the time xcp-rrdd
// reads with Int64.float_of_bits, sub-second part included (issue 35 item 1: int64 seconds read
// that way are a denormal, about 1e-314 s, and xcp-rrdd dropped the data as too old).
func TestWriterTimestampReadByXcpRrddRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugin")
	w, err := Create(path, V2, seedV2Datasources)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, ts := range []time.Time{
		time.Unix(1764246937, 375_000_000), // a fraction a double holds exactly
		time.Unix(1764246937, 123_456_000), // microseconds: within a double's precision
		time.Unix(seedTimestamp, 0),
	} {
		if err := w.Write(ts, seedV2Values); err != nil {
			t.Fatal(err)
		}
		file := readFile(t, path)
		got := xcpRrddTimestamp(file)
		want := float64(ts.UnixNano()) / 1e9
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("xcp-rrdd reads %v as %.9f s; want %.9f", ts, got, want)
		}
		var r Reader
		if err := r.Read(file); err != nil {
			t.Fatal(err)
		}
		if d := r.Timestamp().Sub(ts); d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("Reader reads %v as %v", ts, r.Timestamp())
		}
	}
}

// TestTimestampFromOlderInt64Writers: files whose timestamp field holds int64 seconds (xcp-rrdd's
// writer before CA-391651, rrd-client-lib before 2025-08) still read as those seconds; the rule
// is that a field whose sign and exponent bits are all zero is int64 seconds, anything else a
// double.
func TestTimestampFromOlderInt64Writers(t *testing.T) {
	meta := `{"datasources": {"a": {"value_type": "int64"}}}`
	for _, c := range []struct {
		name string
		bits uint64
		want time.Time
	}{
		{"int64 seconds", 1700000000, time.Unix(1700000000, 0)},
		{"largest int64 read as seconds", 1<<40 - 1, time.Unix(1<<40-1, 0)},
		{"double seconds", math.Float64bits(1700000000), time.Unix(1700000000, 0)},
		{"double with fraction", math.Float64bits(1700000000.25), time.Unix(1700000000, 250_000_000)},
		{"double one second", math.Float64bits(1), time.Unix(1, 0)},
		{"zero", 0, time.Unix(0, 0)},
		{"negative double", math.Float64bits(-5), time.Time{}},
		{"NaN", math.Float64bits(math.NaN()), time.Time{}},
		{"infinity", math.Float64bits(math.Inf(1)), time.Time{}},
		{"int64 beyond the plausible", 1 << 51, time.Time{}},
	} {
		var r Reader
		if err := r.Read(buildV2(c.bits, []uint64{7}, meta, "")); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !r.Timestamp().Equal(c.want) {
			t.Errorf("%s (%#x): Timestamp = %v; want %v", c.name, c.bits, r.Timestamp(), c.want)
		}
	}
}
