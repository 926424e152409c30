package rrdd

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

// buildV2 lays out a v2 file by hand, independently of Encoder: header, data CRC, metadata CRC,
// count, the 8-byte timestamp field, values, metadata length, metadata, then junk (bytes a
// non-truncating writer leaves behind).
func buildV2(tsBits uint64, values []uint64, meta string, junk string) []byte {
	var b []byte
	b = append(b, "DATASOURCES"...)
	b = binary.BigEndian.AppendUint32(b, 0) // data CRC, filled below
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE([]byte(meta)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(values)))
	b = binary.BigEndian.AppendUint64(b, tsBits)
	for _, v := range values {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	binary.BigEndian.PutUint32(b[11:], crc32.ChecksumIEEE(b[23:]))
	b = binary.BigEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	return append(b, junk...)
}

func readFileErr(path string) ([]byte, error) { return os.ReadFile(path) }

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
