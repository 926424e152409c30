package history

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// FuzzDecodeBlock feeds arbitrary bytes to the block decoder: it must not panic, and whatever
// it accepts must re-encode into a block that decodes to the same points.
func FuzzDecodeBlock(f *testing.F) {
	var e encoder
	all := make([]uint8, 64)
	for i := range all {
		all[i] = 1
	}
	vals := make([]uint64, 64)
	for shape := 0; shape < 4; shape++ {
		for i := range vals {
			switch shape {
			case 0:
				vals[i] = 7
			case 1:
				vals[i] = uint64(i * i * 1000)
			case 2:
				vals[i] = math.Float64bits(float64(i%9) / 100)
			case 3:
				vals[i] = math.Float64bits(float64(i) * math.Pi)
			}
		}
		kind := series.Counter
		if shape >= 2 {
			kind = series.Float
		}
		f.Add(e.appendBlock(nil, kind, vals, all, 64), uint16(64))
		pres := make([]uint8, 64)
		pres[3], pres[40] = 1, 1
		f.Add(e.appendBlock(nil, kind, vals, pres, 64), uint16(64))
	}
	f.Fuzz(func(t *testing.T, b []byte, scans uint16) {
		n := int(scans)%MaxBlockScans + 1
		var d decoded
		if err := decodeBlock(b, n, &d); err != nil {
			return
		}
		vals := make([]uint64, n)
		pres := make([]uint8, n)
		for k := 0; k < d.n; k++ {
			vals[d.idx[k]], pres[d.idx[k]] = d.val[k], 1
		}
		var e encoder
		var d2 decoded
		for _, kind := range []series.Kind{series.Counter, series.Float} {
			b2 := e.appendBlock(nil, kind, vals, pres, n)
			if err := decodeBlock(b2, n, &d2); err != nil {
				t.Fatalf("re-encoded block %x does not decode: %v", b2, err)
			}
			if d2.n != d.n || d2.idx != d.idx || d2.val != d.val {
				t.Fatalf("re-encoded block decodes differently")
			}
		}
	})
}

// FuzzReadSnapshot feeds arbitrary bytes to the snapshot loader, with a valid checksum appended
// so that the parser behind it is exercised. It must not panic nor allocate beyond the input's
// size; a snapshot it accepts must survive a write/read round trip.
func FuzzReadSnapshot(f *testing.F) {
	for _, ts0 := range []int64{1_800_000_000_000, 0} {
		b := snapshotBytesF(sampleStore(ts0))
		f.Add(b[:len(b)-4])
	}
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, body []byte) {
		in := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		opt := Options{Now: func() time.Time { return time.UnixMilli(1_800_000_030_000) }, Retention: 1 << 62}
		s, err := ReadSnapshot(bytes.NewReader(in), opt)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := s.WriteSnapshot(&out); err != nil {
			t.Fatal(err)
		}
		s2, err := ReadSnapshot(&out, opt)
		if err != nil {
			t.Fatalf("snapshot of a loaded store does not load: %v", err)
		}
		if a, b := s.Stats(), s2.Stats(); a.Points != b.Points || a.Series != b.Series {
			t.Fatalf("round trip changed stats: %+v -> %+v", a, b)
		}
	})
}

func snapshotBytesF(s *Store) []byte {
	var b bytes.Buffer
	if err := s.WriteSnapshot(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}
