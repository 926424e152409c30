package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// withCRC returns body followed by its CRC-32C trailer, so that fuzzed bodies reach the
// parsers behind the checksum.
func withCRC(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
}

func joinParts(parts [][]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// snapFixture returns the files of a snapshot directory holding sampleStore(ts0) after a few
// series changes (so that the series log has batches), by name.
func snapFixture(ts0 int64) map[string][]byte {
	dir, err := os.MkdirTemp("", "snapfuzz")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s := sampleStore(ts0)
	sv := NewSaver(dir, s)
	if _, err := sv.Save(); err != nil {
		panic(err)
	}
	id, _, _ := s.Lookup(`{"metric":"l"}`)
	s.Drop(id)
	n, _ := s.Series(`{"metric":"n"}`, series.Level)
	s.Begin(ts0 + 30*2000)
	s.Add(n, 5)
	s.Commit()
	if _, err := sv.Save(); err != nil {
		panic(err)
	}
	files := map[string][]byte{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			panic(err)
		}
		files[e.Name()] = b
	}
	return files
}

// FuzzSnapHead feeds HEAD bodies (checksum fixed) to the head parser; what it accepts must
// encode back to a HEAD that parses the same.
func FuzzSnapHead(f *testing.F) {
	for _, ts0 := range []int64{1_800_000_000_000, 0} {
		b := snapFixture(ts0)[headName]
		f.Add(b[:len(b)-4])
	}
	f.Add([]byte(headMagic))
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := parseHead(withCRC(body), nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		h2, err := parseHead(joinParts(encodeHead(h)), nil)
		if err != nil {
			t.Fatalf("re-encoded head does not parse: %v", err)
		}
		if h.scans != h2.scans || h.gen != h2.gen || h.baseSize != h2.baseSize || h.baseCRC != h2.baseCRC ||
			h.logLen != h2.logLen || !slices.Equal(h.segs, h2.segs) || (h.open == nil) != (h2.open == nil) {
			t.Fatalf("head %+v re-parsed as %+v", h, h2)
		}
		if h.open != nil && (!slices.Equal(h.open.ts, h2.open.ts) || !bytes.Equal(h.open.lens, h2.open.lens) || !bytes.Equal(h.open.data, h2.open.data)) {
			t.Fatal("open segment changed by a round trip")
		}
	})
}

// FuzzSnapSegment feeds segment file bodies (checksum fixed) to the segment parser; every block
// of a segment it accepts must decode through the store's index walk, and the segment must
// encode back to the same file.
func FuzzSnapSegment(f *testing.F) {
	for _, ts0 := range []int64{1_800_000_000_000, 0} {
		for name, b := range snapFixture(ts0) {
			if strings.HasPrefix(name, "seg-") {
				f.Add(b[:len(b)-4], uint8(8))
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, scans uint8) {
		n := int(scans)%MaxBlockScans + 1
		in := withCRC(body)
		g, _, err := parseSegFile(in, n, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		var d chunkenc.Decoded
		it := segIter{g: g}
		for id := ID(0); int(id) < len(g.chk)*idGroup; id++ {
			if blk := g.block(id); blk != nil {
				if err := chunkenc.Decode(blk, n, &d); err != nil {
					t.Fatalf("block of ID %d: %v", id, err)
				}
			}
			if a, b := g.block(id), it.block(id); !bytes.Equal(a, b) {
				t.Fatalf("ID %d: random and sequential lookups differ", id)
			}
		}
		parts, _ := segFileParts(g)
		g2, _, err := parseSegFile(joinParts(parts), n, nil)
		if err != nil {
			t.Fatalf("re-encoded segment does not parse: %v", err)
		}
		if !slices.Equal(g.ts, g2.ts) || !bytes.Equal(g.lens, g2.lens) || !bytes.Equal(g.data, g2.data) || g.points != g2.points {
			t.Fatal("segment changed by a round trip")
		}
	})
}

// FuzzSnapKeys feeds a series table base (checksum fixed) and a log to their parsers: the log
// as given (its framing and batch checksums) and as one batch with a valid checksum. A table
// they accept must encode back to a base that parses the same.
func FuzzSnapKeys(f *testing.F) {
	for _, ts0 := range []int64{1_800_000_000_000, 0} {
		files := snapFixture(ts0)
		base, log := files[keysBaseName(1)], files[keysLogName(1)]
		f.Add(base[:len(base)-4], log)
		// The log's first batch payload, for the valid-checksum path.
		r := &snapReader{b: log, p: logHeaderLen}
		f.Add(base[:len(base)-4], r.bytes(r.uvarint(""), ""))
	}
	// Front coding's edges, and the version 2 table (whole keys) an earlier agent wrote.
	table := frontTable()
	base := encodeBase(table)
	batch, _ := appendLogBatch(nil, nil, table)
	r := &snapReader{b: batch}
	f.Add(base[:len(base)-4], r.bytes(r.uvarint(""), ""))
	v2 := encodeBaseV2(table[:len(table)/2])
	f.Add(v2[:len(v2)-4], logV2(table[:len(table)/2], table))
	f.Fuzz(func(t *testing.T, base, log []byte) {
		table, err := parseBase(withCRC(base))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		batch := append(logHeader(), binary.AppendUvarint(nil, uint64(len(log)))...)
		batch = appendCRC(append(batch, log...), log)
		for _, l := range [][]byte{log, batch} {
			got, err := applyLog(slices.Clone(table), l)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v does not wrap ErrCorrupt", err)
				}
				continue
			}
			again, err := parseBase(encodeBase(got))
			if err != nil {
				t.Fatalf("re-encoded table does not parse: %v", err)
			}
			for len(got) > 0 && got[len(got)-1] == nil {
				got = got[:len(got)-1]
			}
			if len(again) != len(got) {
				t.Fatalf("table of %d IDs re-parsed as %d", len(got), len(again))
			}
			for id := range got {
				if (got[id] == nil) != (again[id] == nil) || got[id] != nil && *got[id] != *again[id] {
					t.Fatalf("ID %d: %v re-parsed as %v", id, got[id], again[id])
				}
			}
		}
	})
}

// FuzzLoadDir loads a snapshot directory whose HEAD is the fuzzed body (checksum fixed) and
// whose other files are those of a valid snapshot: whatever HEAD says (segments, open scans,
// series references), LoadDir must not panic and must return a usable store; a store it
// loads without error must save and load again with the same points.
func FuzzLoadDir(f *testing.F) {
	const ts0 = 1_800_000_000_000
	files := snapFixture(ts0)
	b := files[headName]
	f.Add(b[:len(b)-4])
	opt := Options{Now: func() time.Time { return time.UnixMilli(ts0 + 60_000) }}
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		for name, b := range files {
			if name == headName {
				b = withCRC(body)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, sv, err := LoadDir(dir, "", opt)
		if s == nil || sv == nil {
			t.Fatal("LoadDir returned no store")
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if _, err := sv.Save(); err != nil {
			t.Fatal(err)
		}
		s2, _, err := LoadDir(dir, "", opt)
		if err != nil {
			t.Fatalf("a saved snapshot of a loaded one does not load: %v", err)
		}
		samePoints(t, s, s2)
	})
}
