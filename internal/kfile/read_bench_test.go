package kfile

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkReadStatOpenClose and BenchmarkReadStatPread compare the two ways of reading
// /proc/self/stat: open, read to EOF and close, or pread on a file kept open.
func BenchmarkReadStatOpenClose(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadFileAt(unix.AT_FDCWD, []byte("/proc/self/stat\x00"), &buf, 4096); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadStatPread(b *testing.B) {
	buf := make([]byte, 0, 4096)
	var f Kept
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Read(unix.AT_FDCWD, []byte("/proc/self/stat\x00"), &buf, 4096, true); err != nil {
			b.Fatal(err)
		}
	}
}
