package rrdd

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"strconv"
	"time"
)

// Encoder builds plugin file images for a fixed set of datasources. It encodes the metadata once
// and then only the values on each Encode, as the v2 protocol intends. The zero value is not
// usable; make one with NewEncoder. An Encoder is not safe for concurrent use.
type Encoder struct {
	proto   Protocol
	dss     []Datasource
	meta    []byte // v2 metadata
	metaSum uint32
	buf     []byte
}

// NewEncoder returns an Encoder of protocol p (V1 or V2) for dss, which it copies. Values
// passed to Encode pair with dss by index.
func NewEncoder(p Protocol, dss []Datasource) (*Encoder, error) {
	if p != V1 && p != V2 {
		return nil, fmt.Errorf("unknown protocol %d", p)
	}
	e := &Encoder{proto: p}
	if err := e.SetDatasources(dss); err != nil {
		return nil, err
	}
	return e, nil
}

// SetDatasources replaces the datasources (the metadata) of the following Encodes.
func (e *Encoder) SetDatasources(dss []Datasource) error {
	seen := make(map[string]struct{}, len(dss))
	for i := range dss {
		if err := dss[i].validate(); err != nil {
			return err
		}
		if _, dup := seen[dss[i].Name]; dup {
			return fmt.Errorf("datasource %q listed twice", dss[i].Name)
		}
		seen[dss[i].Name] = struct{}{}
	}
	e.dss = append(e.dss[:0:0], dss...)
	e.meta = appendMetadata(e.meta[:0], e.dss)
	e.metaSum = crc32.ChecksumIEEE(e.meta)
	return nil
}

// Datasources returns the Encoder's datasources; do not modify them.
func (e *Encoder) Datasources() []Datasource { return e.dss }

// Encode returns the file image for the values at time ts. Protocol v2 stores ts as the bits of
// an IEEE-754 double of unix seconds, sub-second part kept, as xcp-rrdd reads it since CA-391651
// and as Python's rrdd.py and rrd-client-lib (since 2025-08) write it; v1 writes whole seconds
// in its JSON. The returned slice is owned by the Encoder and valid until the next Encode.
func (e *Encoder) Encode(ts time.Time, values []Value) ([]byte, error) {
	if len(values) != len(e.dss) {
		return nil, fmt.Errorf("%d values for %d datasources", len(values), len(e.dss))
	}
	if e.proto == V1 {
		e.buf = e.appendV1(e.buf[:0], ts, values)
		return e.buf, nil
	}
	n := len(values)
	size := v2Values + 8*n + 4 + len(e.meta)
	if cap(e.buf) < size {
		e.buf = make([]byte, size)
	}
	b := e.buf[:size]
	copy(b, Header)
	binary.BigEndian.PutUint32(b[v2MetaCRC:], e.metaSum)
	binary.BigEndian.PutUint32(b[v2Count:], uint32(n))
	binary.BigEndian.PutUint64(b[v2Timestamp:], math.Float64bits(unixSeconds(ts)))
	for i, v := range values {
		binary.BigEndian.PutUint64(b[v2Values+8*i:], uint64(v))
	}
	end := v2Values + 8*n
	binary.BigEndian.PutUint32(b[end:], uint32(len(e.meta)))
	copy(b[end+4:], e.meta)
	binary.BigEndian.PutUint32(b[v2DataCRC:], crc32.ChecksumIEEE(b[v2Timestamp:end]))
	e.buf = b
	return b, nil
}

// unixSeconds is ts as float unix seconds. The whole and fractional parts are converted apart so
// that the fraction is rounded once, at the double's precision (a quarter of a microsecond today).
func unixSeconds(ts time.Time) float64 {
	return float64(ts.Unix()) + float64(ts.Nanosecond())/1e9
}

// appendV1 appends a v1 image: header, length, MD5, then the JSON and a newline, as
// rrd_json.ml's dss_to_json writes it.
func (e *Encoder) appendV1(b []byte, ts time.Time, values []Value) []byte {
	js := make([]byte, 0, 256*len(values)+64)
	js = append(js, `{"datasources": {`...)
	for i := range e.dss {
		if i > 0 {
			js = append(js, ", "...)
		}
		js = appendJSONString(js, e.dss[i].Name)
		js = append(js, ": "...)
		js = appendDatasourceFields(js, &e.dss[i], true, values[i])
	}
	js = append(js, `}, "timestamp": `...)
	js = strconv.AppendInt(js, ts.Unix(), 10)
	js = append(js, '}')
	sum := md5.Sum(js)
	b = append(b, Header...)
	b = append(b, '\n')
	b = fmt.Appendf(b, "%08x\n", len(js))
	b = hex.AppendEncode(b, sum[:])
	b = append(b, '\n')
	b = append(b, js...)
	return append(b, '\n')
}

// Writer publishes datasources to a plugin file, updating it in place as XAPI's plugin
// libraries do (so that a reader holding the file open or mapped sees the updates): the values
// and metadata first, then the header with the checksums, then the file is truncated if it
// shrank. Readers must therefore be ready for torn reads, which the checksums reveal. A Writer
// owns its file; it is not safe for concurrent use.
type Writer struct {
	enc  *Encoder
	f    *os.File
	path string
	size int
}

// Create creates (or opens and reuses) the plugin file at path, mode 0644, and returns a Writer
// of protocol p for dss.
func Create(path string, p Protocol, dss []Datasource) (*Writer, error) {
	enc, err := NewEncoder(p, dss)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create plugin file: %w", err)
	}
	return &Writer{enc: enc, f: f, path: path, size: -1}, nil
}

// SetDatasources changes the datasources from the next Write on.
func (w *Writer) SetDatasources(dss []Datasource) error { return w.enc.SetDatasources(dss) }

// Write publishes values (paired by index with the datasources) taken at ts.
func (w *Writer) Write(ts time.Time, values []Value) error {
	if w.f == nil {
		return errors.New("write plugin file: writer closed")
	}
	b, err := w.enc.Encode(ts, values)
	if err != nil {
		return err
	}
	split := v2Values // header last, as rrdd.py does
	if w.enc.proto == V1 {
		split = v1Payload
	}
	if _, err := w.f.WriteAt(b[split:], int64(split)); err != nil {
		return fmt.Errorf("write plugin file: %w", err)
	}
	if _, err := w.f.WriteAt(b[:split], 0); err != nil {
		return fmt.Errorf("write plugin file: %w", err)
	}
	if len(b) != w.size {
		if err := w.f.Truncate(int64(len(b))); err != nil {
			return fmt.Errorf("truncate plugin file: %w", err)
		}
		w.size = len(b)
	}
	return nil
}

// Close closes and removes the plugin file, as XAPI's libraries do when a plugin stops. It is
// safe to call twice.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if rerr := os.Remove(w.path); rerr != nil && err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}
