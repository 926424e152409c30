package remotewrite

import (
	"math"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// The remote-write 1.0 messages (prometheus/prompb/types.proto, remote.proto):
//
//	message WriteRequest { repeated TimeSeries timeseries = 1; … }
//	message TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; … }
//	message Label        { string name = 1; string value = 2; }
//	message Sample       { double value = 1; int64 timestamp = 2; }
//
// They are written with google.golang.org/protobuf's protowire (the official Go protobuf
// module's wire layer), straight into a reused buffer: a series' labels are encoded once, when
// the series is first seen, and copied into every request.

// Label is one label of a series as sent.
type Label struct{ Name, Value string }

// AppendLabels appends the encoding of labels as TimeSeries.labels fields (sorted by name is
// the caller's business: receivers want them sorted).
func AppendLabels(dst []byte, labels []Label) []byte {
	for _, l := range labels {
		n := 1 + protowire.SizeBytes(len(l.Name)) + 1 + protowire.SizeBytes(len(l.Value))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(n))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, l.Name)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, l.Value)
	}
	return dst
}

// staleNaN is Prometheus's staleness marker; a float series' NaN is never sent as it.
const (
	staleNaN  = 0x7ff0000000000002
	normalNaN = 0x7ff8000000000001
)

// AppendSeries appends one WriteRequest.timeseries field: the encoded labels (AppendLabels)
// and one sample per (ts, value) pair.
func AppendSeries(dst []byte, labels []byte, ts []int64, vals []float64) []byte {
	size := len(labels)
	for i := range ts {
		size += 1 + protowire.SizeBytes(sampleSize(ts[i]))
	}
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = append(dst, labels...)
	for i := range ts {
		dst = appendSample(dst, ts[i], vals[i])
	}
	return dst
}

// AppendSeries1 is AppendSeries of a single sample, without slices.
func AppendSeries1(dst []byte, labels []byte, ts int64, val float64) []byte {
	ss := sampleSize(ts)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(len(labels)+1+protowire.SizeBytes(ss)))
	dst = append(dst, labels...)
	return appendSample(dst, ts, val)
}

// SeriesSize is the length AppendSeries1 appends.
func SeriesSize(labelsLen int, ts int64) int {
	return 1 + protowire.SizeBytes(labelsLen+1+protowire.SizeBytes(sampleSize(ts)))
}

func sampleSize(ts int64) int {
	return 1 + 8 + 1 + protowire.SizeVarint(uint64(ts))
}

func appendSample(dst []byte, ts int64, v float64) []byte {
	bits := math.Float64bits(v)
	if bits == staleNaN {
		bits = normalNaN
	}
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(sampleSize(ts)))
	dst = protowire.AppendTag(dst, 1, protowire.Fixed64Type)
	dst = protowire.AppendFixed64(dst, bits)
	dst = protowire.AppendTag(dst, 2, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(ts))
}

// Compress returns the snappy block encoding of a WriteRequest (what remote write 1.0 sends:
// Content-Encoding: snappy, the block format, not the framed one), reusing dst's storage.
// github.com/golang/snappy is the format's reference implementation, by the Go authors, and
// what Prometheus 2.x's receiver decodes with.
func Compress(dst, req []byte) []byte {
	return snappy.Encode(dst[:cap(dst)], req)
}
