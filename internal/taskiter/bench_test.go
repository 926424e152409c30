package taskiter

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkRead is one pass of the iterator over the machine's processes, side by side with
// BenchmarkSchedstatFiles, what it replaces: a pread(2) of each process's kept
// /proc/PID/schedstat. Both report processes per op; compare ns/op at the same count (start,
// e.g., 10 000 sleeping processes first: bench/report churn).
func BenchmarkRead(b *testing.B) {
	it, err := Open()
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	b.ReportAllocs()
	var tasks []Task
	for b.Loop() {
		if tasks, err = it.Read(tasks[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tasks)), "procs/op")
}

func BenchmarkSchedstatFiles(b *testing.B) {
	d, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	var fds []int
	for _, e := range d {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		fd, err := unix.Open("/proc/"+e.Name()+"/schedstat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			fds = append(fds, fd)
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	buf := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		for _, fd := range fds {
			unix.Pread(fd, buf, 0)
		}
	}
	b.ReportMetric(float64(len(fds)), "procs/op")
}
