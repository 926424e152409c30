package rrdd

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"time"
)

// Errors returned by Reader.Read, matched with errors.Is. Each returned error wraps one of them
// and says what was wrong, by offset and length, never by quoting the file: a reader may be
// handed any file, and its errors end up where others read them.
var (
	// ErrNoUpdate: the data checksum (v2) or MD5 (v1) is the one of the last good read; the
	// plugin has not written since. Not a failure: the last values are still current.
	ErrNoUpdate = errors.New("no update")
	// ErrHeader: the file does not start with "DATASOURCES" or its v1 framing is malformed.
	ErrHeader = errors.New("invalid header")
	// ErrChecksum: a checksum does not match its data: a torn read of a file being written,
	// or a corrupt file. The last good values are kept.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrTruncated: a length in the file points past its end: a torn read of a file being
	// written, or a corrupt file. The last good values are kept.
	ErrTruncated = errors.New("truncated")
	// ErrPayload: the checksums match but the metadata or JSON cannot be used.
	ErrPayload = errors.New("invalid payload")
)

// Protocol is a plugin file's protocol version.
type Protocol uint8

// The protocol versions.
const (
	V1 Protocol = 1
	V2 Protocol = 2
)

// v2 field offsets (rrd_protocol_v2.ml: 11-byte header, 4-byte CRCs and count, 8-byte
// timestamp and values, 4-byte metadata length).
const (
	v2DataCRC   = len(Header)
	v2MetaCRC   = v2DataCRC + 4
	v2Count     = v2MetaCRC + 4
	v2Timestamp = v2Count + 4
	v2Values    = v2Timestamp + 8 // 31
)

// v1 framing (rrd_protocol_v1.ml): "DATASOURCES\n", 8 hex digits, "\n", 32 hex digits, "\n".
const (
	v1Length  = len(Header) + 1 // 12
	v1MD5     = v1Length + 8 + 1
	v1Payload = v1MD5 + 32 + 1 // 54
)

// maxPlausibleUnix bounds a timestamp (about the year 36812); a larger one decodes as zero.
const maxPlausibleUnix = 1 << 40

// Stats counts what a Reader has seen.
type Stats struct {
	Updates   uint64 // reads that produced new values
	NoUpdates uint64 // ErrNoUpdate
	Torn      uint64 // ErrChecksum and ErrTruncated
	Errors    uint64 // ErrHeader and ErrPayload
	Reparses  uint64 // metadata parses (v2: metadata checksum changes; v1: every update)
}

// Reader decodes successive snapshots of one plugin file, caching its metadata between reads.
// The zero value is ready to use. A Reader is not safe for concurrent use; keep one per file.
type Reader struct {
	proto    Protocol
	have     bool // a good read happened; dataSum is meaningful
	dataSum  uint32
	md5Sum   [16]byte
	metaSum  uint32
	haveMeta bool
	dss      []Datasource
	values   []Value
	ts       time.Time
	metaGen  uint64
	stats    Stats
}

// Read decodes the file contents b (the whole file; bytes after the data are ignored) and, on
// success, updates Datasources, Values and Timestamp. It returns an error wrapping ErrNoUpdate,
// ErrHeader, ErrChecksum, ErrTruncated or ErrPayload otherwise, leaving the last good values in
// place. Read does not keep b.
func (r *Reader) Read(b []byte) error {
	p, err := detect(b)
	if err != nil {
		r.stats.Errors++
		return err
	}
	if r.proto != 0 && p != r.proto {
		// A plugin restarted with the other protocol: nothing cached is valid.
		*r = Reader{stats: r.stats, metaGen: r.metaGen + 1}
	}
	r.proto = p
	if p == V1 {
		err = r.readV1(b)
	} else {
		err = r.readV2(b)
	}
	switch {
	case err == nil:
		r.stats.Updates++
	case errors.Is(err, ErrNoUpdate):
		r.stats.NoUpdates++
	case errors.Is(err, ErrChecksum), errors.Is(err, ErrTruncated):
		r.stats.Torn++
	default:
		r.stats.Errors++
	}
	return err
}

// detect tells v1 from v2. A v1 file has "\n" at offsets 11 and 20 (around the hex length); in
// v2 offset 20 is the second byte of the datasource count, 0x0a only for counts of 655360 and
// more, far beyond what fits in a plugin file.
func detect(b []byte) (Protocol, error) {
	if len(b) < len(Header) || string(b[:len(Header)]) != Header {
		return 0, fmt.Errorf("no %s at offset 0 (file of %d bytes): %w", Header, len(b), ErrHeader)
	}
	if len(b) > v1MD5 && b[len(Header)] == '\n' && b[v1MD5-1] == '\n' {
		return V1, nil
	}
	return V2, nil
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func (r *Reader) readV2(b []byte) error {
	if len(b) < v2Values {
		return fmt.Errorf("%d bytes, shorter than the %d-byte v2 header: %w", len(b), v2Values, ErrTruncated)
	}
	dataSum := binary.BigEndian.Uint32(b[v2DataCRC:])
	if r.have && dataSum == r.dataSum {
		return ErrNoUpdate
	}
	metaSum := binary.BigEndian.Uint32(b[v2MetaCRC:])
	count := uint64(binary.BigEndian.Uint32(b[v2Count:]))
	valuesEnd := uint64(v2Values) + 8*count
	if valuesEnd > uint64(len(b)) {
		return fmt.Errorf("the values the datasource count at offset %d announces end past the file's %d bytes: %w", v2Count, len(b), ErrTruncated)
	}
	if got := crc32.ChecksumIEEE(b[v2Timestamp:valuesEnd]); got != dataSum {
		return fmt.Errorf("data at offset %d: %w", v2Timestamp, ErrChecksum)
	}
	n := int(count)
	if !r.haveMeta || metaSum != r.metaSum {
		// The metadata changed: verify and parse it before touching the values.
		if valuesEnd+4 > uint64(len(b)) {
			return fmt.Errorf("no room for the metadata length at the end of the values: %w", ErrTruncated)
		}
		mlen := uint64(binary.BigEndian.Uint32(b[valuesEnd:]))
		mstart := valuesEnd + 4
		if mstart+mlen > uint64(len(b)) {
			return fmt.Errorf("the metadata length at the end of the values points past the file's %d bytes: %w", len(b), ErrTruncated)
		}
		meta := b[mstart : mstart+mlen]
		if got := crc32.ChecksumIEEE(meta); got != metaSum {
			return fmt.Errorf("metadata: %w", ErrChecksum)
		}
		// rrd-client-lib counts a trailing NUL; xcp-rrdd trims NULs before parsing.
		r.stats.Reparses++
		dss, err := parseMetadata(bytes.Trim(meta, "\x00"))
		if err != nil {
			return fmt.Errorf("metadata at offset %d: %w: %w", mstart, ErrPayload, err)
		}
		// As xcp-rrdd: values are read per metadata entry, so a count larger than the metadata
		// (rrdd.py when a plugin sets one name twice) leaves the extra values unread. Fewer
		// values than entries would pair entries with the metadata's bytes: refused.
		if len(dss) > n {
			return fmt.Errorf("the metadata lists more datasources than the count at offset %d: %w", v2Count, ErrPayload)
		}
		r.dss, r.metaSum, r.haveMeta = dss, metaSum, true
		r.metaGen++
	} else if n < len(r.dss) {
		return fmt.Errorf("the unchanged metadata lists more datasources than the count at offset %d: %w", v2Count, ErrPayload)
	}
	n = len(r.dss)
	if cap(r.values) < n {
		r.values = make([]Value, n)
	}
	r.values = r.values[:n]
	vb := b[v2Values:valuesEnd]
	for i := range r.values {
		r.values[i] = Value(binary.BigEndian.Uint64(vb[8*i:]))
	}
	r.ts = decodeTimestamp(binary.BigEndian.Uint64(b[v2Timestamp:]))
	r.dataSum, r.have = dataSum, true
	return nil
}

// decodeTimestamp reads the v2 timestamp field. Current writers (xcp-rrdd since CA-391651,
// Python's rrdd.py, rrd-client-lib since 2025-08, this package) store the bits of a double of
// unix seconds; older OCaml and C writers stored int64 seconds. The two are told apart by the
// double's exponent field: int64 seconds below 2^52 (any date before the year 142 million) have
// sign and exponent bits all zero, which as a double is a denormal (below 2.3e-308 seconds) or
// zero, a time no writer means. So: sign and exponent zero means int64 seconds; anything else is
// a double. A negative, infinite, NaN or implausibly large time decodes as the zero Time.
func decodeTimestamp(bits uint64) time.Time {
	if bits>>52 == 0 {
		if bits >= maxPlausibleUnix {
			return time.Time{}
		}
		return time.Unix(int64(bits), 0)
	}
	f := math.Float64frombits(bits)
	if !(f >= 0 && f < maxPlausibleUnix) { // also false for NaN
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
}

func (r *Reader) readV1(b []byte) error {
	if len(b) < v1Payload || b[v1Payload-1] != '\n' {
		return fmt.Errorf("v1 framing: no newline after the checksum: %w", ErrHeader)
	}
	length, err := strconv.ParseUint(string(b[v1Length:v1Length+8]), 16, 32)
	if err != nil || !isHex(b[v1Length:v1Length+8]) {
		return fmt.Errorf("v1 length at offset %d is not 8 hex digits: %w", v1Length, ErrHeader)
	}
	var want [16]byte
	if _, err := hex.Decode(want[:], b[v1MD5:v1MD5+32]); err != nil {
		return fmt.Errorf("v1 checksum at offset %d is not 32 hex digits: %w", v1MD5, ErrHeader)
	}
	end := uint64(v1Payload) + length
	if end > uint64(len(b)) {
		return fmt.Errorf("the v1 JSON at offset %d ends past the file's %d bytes: %w", v1Payload, len(b), ErrTruncated)
	}
	payload := b[v1Payload:end]
	// As rrd_protocol_v1.ml: verify the checksum first, then compare it with the last one.
	if got := md5.Sum(payload); got != want {
		return fmt.Errorf("v1 JSON at offset %d: %w", v1Payload, ErrChecksum)
	}
	if r.have && want == r.md5Sum {
		return ErrNoUpdate
	}
	r.stats.Reparses++
	ts, dss, values, err := parseV1(payload)
	if err != nil {
		return fmt.Errorf("v1 JSON at offset %d: %w: %w", v1Payload, ErrPayload, err)
	}
	if !r.haveMeta || !sameDatasources(dss, r.dss) {
		r.dss, r.haveMeta = dss, true
		r.metaGen++
	}
	r.values = append(r.values[:0], values...)
	r.ts = ts
	r.md5Sum, r.have = want, true
	return nil
}

func sameDatasources(a, b []Datasource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		// Compare bounds bitwise so NaN equals NaN.
		if x.Name != y.Name || x.Description != y.Description || x.Owner != y.Owner ||
			x.ValueType != y.ValueType || x.Type != y.Type || x.Default != y.Default ||
			x.Units != y.Units || math.Float64bits(x.Min) != math.Float64bits(y.Min) ||
			math.Float64bits(x.Max) != math.Float64bits(y.Max) || x.Transform != y.Transform {
			return false
		}
	}
	return true
}

// parseV1 parses a v1 JSON document.
func parseV1(b []byte) (time.Time, []Datasource, []Value, error) {
	root, err := parseJSON(b)
	if err != nil {
		return time.Time{}, nil, nil, err
	}
	dss, err := datasourcesObject(&root)
	if err != nil {
		return time.Time{}, nil, nil, err
	}
	var ts time.Time
	if s, ok, err := fieldText(&root, "timestamp"); err != nil {
		return time.Time{}, nil, nil, err
	} else if ok {
		f, err := parseFloatText(s)
		if err != nil {
			return time.Time{}, nil, nil, fmt.Errorf("timestamp: %w", err)
		}
		if f >= 0 && f < maxPlausibleUnix {
			sec, frac := math.Modf(f)
			ts = time.Unix(int64(sec), int64(frac*1e9))
		}
	}
	out := make([]Datasource, 0, len(dss.members))
	values := make([]Value, 0, len(dss.members))
	seen := make(map[string]struct{}, len(dss.members))
	for i := range dss.members {
		m := &dss.members[i]
		if _, dup := seen[m.key]; dup {
			return time.Time{}, nil, nil, fmt.Errorf("datasource %d at offset %d: name listed twice", i, m.pos)
		}
		seen[m.key] = struct{}{}
		ds, err := parseDatasource(i, m, Float) // v1 defaults value_type to float
		if err != nil {
			return time.Time{}, nil, nil, err
		}
		s, ok, err := fieldText(&m.value, "value")
		if err != nil {
			return time.Time{}, nil, nil, fmt.Errorf("datasource %d at offset %d: %w", i, m.pos, err)
		}
		if !ok {
			return time.Time{}, nil, nil, fmt.Errorf("datasource %d at offset %d: value missing", i, m.pos)
		}
		v, err := parseV1Value(s, ds.ValueType)
		if err != nil {
			return time.Time{}, nil, nil, fmt.Errorf("datasource %d at offset %d: value: %w", i, m.pos, err)
		}
		out = append(out, ds)
		values = append(values, v)
	}
	return ts, out, values, nil
}

// parseV1Value parses a v1 value: a string or a bare number (OCaml writes strings, Python
// numbers). An int64 value may be written as an integral float ("12.0").
func parseV1Value(s string, t ValueType) (Value, error) {
	if t == Int64 {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return IntValue(i), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, errors.New("not an int64")
		}
		return IntValue(int64(f)), nil
	}
	f, err := parseFloatText(s)
	if err != nil {
		return 0, err
	}
	return FloatValue(f), nil
}

// Protocol returns the protocol of the last file read, 0 before the first.
func (r *Reader) Protocol() Protocol { return r.proto }

// Datasources returns the datasources of the last good read, in file order. The slice is owned by
// the Reader and replaced (not modified) when the metadata changes; do not modify it.
func (r *Reader) Datasources() []Datasource { return r.dss }

// Values returns the values of the last good read, paired by index with Datasources. The slice
// is owned by the Reader and overwritten by the next successful Read.
func (r *Reader) Values() []Value { return r.values }

// Timestamp returns the plugin's timestamp of the last good read (zero if implausible). Current
// xcp-rrdd stamps the values with it (and derives rates from the interval between two), so a
// writer whose timestamp it misreads loses its data there.
func (r *Reader) Timestamp() time.Time { return r.ts }

// MetadataGeneration increases each time Datasources changes, so callers can rebuild what they
// derived from it only then.
func (r *Reader) MetadataGeneration() uint64 { return r.metaGen }

// Stats returns the Reader's counters.
func (r *Reader) Stats() Stats { return r.stats }
