package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// cpuNs returns the process's CPU time (user + system) in ns.
func cpuNs(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkWrite replaces a 100-byte state file (a position) per op: WriteFile (fsync of the
// file and the directory), Write with NoDirSync (the history's segment files, one directory
// fsync per save), and side by side the writer carbon's position had before (os.WriteFile of
// a temporary file and a rename, nothing fsynced). cpu-ns/op is the process's CPU time
// (rusage), which is what the agent pays; ns/op is mostly waiting for the disk.
//
//	go test -run '^$' -bench Write -benchtime 2000x ./internal/atomicfile/
func BenchmarkWrite(b *testing.B) {
	data := []byte(`{"url":"http://vm:8428/api/v1/write","acked_ms":1764086400000,"late_ms":1764086398000}` + "\n")
	for _, bc := range []struct {
		name  string
		write func(path string) error
	}{
		{"WriteFile", func(path string) error { return WriteFile(path, data, 0o600) }},
		{"NoDirSync", func(path string) error {
			_, err := Write(path, Options{Perm: 0o600, NoDirSync: true}, data)
			return err
		}},
		{"rename-no-fsync", func(path string) error {
			if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
				return err
			}
			return os.Rename(path+".tmp", path)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "pos.json")
			b.ReportAllocs()
			c0 := cpuNs(b)
			for range b.N {
				if err := bc.write(path); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
