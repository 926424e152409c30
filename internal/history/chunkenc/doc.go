// Package chunkenc is the history's block codec: it compresses the points of one series over
// the scans of one segment (at most MaxScans) into a block and decodes them back, exactly
// (values are raw uint64 bits: counters, levels and float64 bits with NaN payloads, ±Inf and -0
// kept). It knows nothing of series tables, segments or snapshots: internal/history lays the
// blocks out and this package only encodes and decodes one at a time, as Prometheus keeps
// tsdb/chunkenc apart from its tsdb. The block format is written out in block.go; history's
// doc.go says why each encoding is chosen.
//
// # Concurrency
//
// An Encoder holds scratch space and is owned by one goroutine (it allocates nothing once its
// output buffer has grown). Decode is a pure function of its input: any number of goroutines
// may call it at once, each with its own Decoded. A block is never modified once appended:
// readers may decode it while a writer appends others to another buffer.
//
// # Input
//
// Decode parses bytes read from snapshot files: it never panics, allocates nothing and reads
// nothing past the block; malformed input is an error wrapping ErrCorrupt (FuzzDecodeBlock).
package chunkenc
