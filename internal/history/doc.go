// Package history is the agent's in-memory store of the last hour (Options.Retention) of every
// numeric series at full scan precision: exact values, compressed, with snapshots that carry it
// across restarts.
//
// # Model
//
// A scan is one column of the store: Begin(ts), one Add per series that has a value, Commit.
// Timestamps are stored once per scan, not per series. A series not added in a scan has a gap
// there: readers get only the points that exist, never an invented value. Kinds are those of
// internal/series: Counter (uint64), Level (int64) and Float (float64 bits, NaN payloads, ±Inf
// and -0 preserved); values travel as raw uint64 bits. A counter that goes down is stored as
// is; Rate turns two points into a per-second rate and refuses to across a reset.
//
// A pushed point, which carries its own time, is stored once by AddAt at the scan its time
// falls in (the first scan at or after it, within MaxSlot), the open scan or a committed one of
// the open segment (late.go: copy-on-write of its chunk at Commit); older points are refused
// (ErrTooOld), since closed segments are immutable, and a point after the open scan is the
// caller's to keep for a later one (ErrFuture). With Options.GraceScans, a closing segment
// leaves its newest scans in the open staging (carried over, published with the segment in
// one view), so that late points find at least that many scans even right after a close.
//
// # Layout
//
// Scans are grouped into segments of Options.BlockScans scans (64 by default: ~2 min at 2 s).
// The open segment is kept uncompressed and sparse (staging.go): a series gets a row only when
// it has a point in the segment, and a row's storage comes in chunks of 8 scans (8 bytes of
// value and 1 of presence per scan), in pages that never move; so Add is a few loads and two
// stores, and a series that stopped (a dead process's) costs nothing there. When it is full, Commit compresses it into one block per series
// in a single allocation: the time column, an index (one uvarint length per series plus a
// checkpoint every 64 IDs) and the blocks. Expire drops whole segments, only once their newest
// scan is older than Retention, so a query for the last Retention always sees every point of it.
//
// Blocks are encoded and decoded by the leaf package chunkenc (internal/history/chunkenc, the
// codec alone, as Prometheus keeps tsdb/chunkenc apart from its tsdb); this package lays them out
// in segments, indexes them and persists them. Each block chooses its encoding knowing the whole
// block: the presence (every scan, one run,
// or a bitmap), then for integers the cheaper of deltas offset by their minimum and
// deltas-of-deltas, each residual written with a zero flag and one of two bit widths picked
// from a histogram (a constant block is its header and one value; a steady counter a few
// bytes); floats that are all integral or short decimals (up to 6 digits, checked to round trip
// bit-exactly) are encoded as those integers, others with Gorilla XOR.
//
// # Concurrency
//
// One writer goroutine (the scanner) calls Series, Begin, Add, Commit, Expire and Newest (the
// O(1) bound on a series' newest point that the registry's read index starts a loaded series
// with). Any number of readers call Lookup, Each, Range, Last, Latest, Stats and Saver.Save
// concurrently. Range, Last and Latest cost the segments they read (those of
// the window; for Last, back to the series' newest point), a walk of at most 64 index entries
// in each to find the series' block, whatever the other series hold: which series to read, out
// of every one kept, is the registry's read index's work (internal/registry, index.go).
// Readers take no lock shared with the writer's hot path: closed segments are
// immutable and published through an atomic pointer; the open segment's committed scans are
// published by an atomic count, and a reader pins the open segment with a reader count so the
// writer does not recycle it underneath; the writer never waits for a pinned one, it uses
// another buffer instead (a retired staging's pages go to a pool the next stagings grow from
// once no reader holds it). Registering or deleting a series takes a mutex that readers hold
// only for one lookup in the key index (Lookup; keyindex.go: a table without pointers or
// tombstones, so that the churn of short-lived processes' series neither lengthens lookups nor
// gives the garbage collector a map of strings to scan). Reader callbacks (Range's fn) run
// without anything pinned.
//
// # Persistence
//
// A Saver keeps a Store's snapshot in a directory incrementally (snapdir.go): each closed
// segment is written once to its own file, the series table is a base file plus an append-only
// log of changes (each key front-coded against the previous one: a process's series differ in
// their metric name only), and a small HEAD, replaced atomically (temporary file, fsync, rename, fsync of
// the directory) by every Save, names those files with their sizes and CRC-32C checksums and
// holds the open segment's committed scans; files no HEAD names are deleted. Save is a reader:
// it may run concurrently with the writer. LoadDir loads it, dropping data older than
// Retention (a single-file snapshot of the version 1 format, which pre-release agents wrote, is
// no longer read: it is refused with an error naming it and left in place, losing nothing else); a damaged
// HEAD or series table is moved aside (name.corrupt-<unix seconds>) and the store starts empty,
// a damaged segment file is moved aside and only its scans are lost, with an error wrapping
// ErrCorrupt to log. Every parser checks each count against the remaining input before
// allocating (series IDs are bounded by MaxSeries). The agent saves periodically (losing at most one period on kill -9) and once more
// at shutdown after the last Commit (losing nothing). Series keep their IDs across a save and a
// load.
//
// See README.md for measurements against Prometheus XOR chunks.
package history
