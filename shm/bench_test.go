package shm

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func startedCounter(b *testing.B) (*Collection, *Counter) {
	b.Helper()
	c := NewCollection(Options{Path: filepath.Join(b.TempDir(), "app")})
	cnt := Must(c.Counter(map[string]string{"metric": "requests"}))
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, cnt
}

// BenchmarkCounterInc compares Counter.Inc with a bare atomic.AddUint64 on the same mapped
// word: the target is at most 1.05 times the bare atomic, with no allocation. The loops use
// b.N rather than b.Loop, which would keep Inc from being inlined as it is in real code.
func BenchmarkCounterInc(b *testing.B) {
	b.Run("shm.Counter.Inc", func(b *testing.B) {
		_, cnt := startedCounter(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			cnt.Inc()
		}
	})
	b.Run("atomic.AddUint64", func(b *testing.B) {
		_, cnt := startedCounter(b)
		p := cnt.cell.ptr()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			atomic.AddUint64(p, 1)
		}
	})
	b.Run("shm.Counter.Inc/parallel", func(b *testing.B) {
		_, cnt := startedCounter(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				cnt.Inc()
			}
		})
	})
	b.Run("atomic.AddUint64/parallel", func(b *testing.B) {
		_, cnt := startedCounter(b)
		p := cnt.cell.ptr()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				atomic.AddUint64(p, 1)
			}
		})
	})
}

func BenchmarkMetrics(b *testing.B) {
	c := NewCollection(Options{Path: filepath.Join(b.TempDir(), "app")})
	in := Must(c.Integer(map[string]string{"m": "i"}))
	fl := Must(c.Float(map[string]string{"m": "f"}))
	st := Must(c.State(map[string]string{"m": "s"}, 0))
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("Integer.Add", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in.Add(1)
		}
	})
	b.Run("Float.Add", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fl.Add(1)
		}
	})
	b.Run("State.Enter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st.Enter("SELECT * FROM requests WHERE id = $1")
		}
	})
}

// BenchmarkReaderSteadyState re-reads an unchanged application's files and decodes every
// value, as the agent does each scan; it reports ns/value (target: at most 20).
func BenchmarkReaderSteadyState(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run("values="+strconv.Itoa(n), func(b *testing.B) {
			base := filepath.Join(b.TempDir(), "app")
			c := NewCollection(Options{Path: base})
			for i := range n {
				switch i % 10 {
				case 8:
					Must(c.Integer(map[string]string{"metric": "level", "i": strconv.Itoa(i)})).Set(int64(i))
				case 9:
					Must(c.State(map[string]string{"metric": "state", "i": strconv.Itoa(i)}, 0)).Enter("working")
				default:
					Must(c.Counter(map[string]string{"metric": "counter", "i": strconv.Itoa(i)})).Add(uint64(i))
				}
			}
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			r := NewReader(base, ReaderOptions{})
			defer r.Close()
			if _, err := r.Read(); err != nil {
				b.Fatal(err)
			}
			b.Run("floor", func(b *testing.B) {
				// The system calls a steady-state Read made before .values was mapped (pread
				// of .values, lstat of .meta), and nothing else.
				mp := newCPath(base + ".meta")
				f, err := os.Open(base + ".values")
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, r.layout.Size)
				var st unix.Stat_t
				b.ReportAllocs()
				for b.Loop() {
					f.ReadAt(buf, 0)
					lstat(&mp, &st)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
			})
			read := func(b *testing.B, read func() (Snapshot, error)) {
				var sum uint64
				b.ReportAllocs()
				for b.Loop() {
					snap, err := read()
					if err != nil {
						b.Fatal(err)
					}
					for i := range snap.Layout.Entries {
						e := &snap.Layout.Entries[i]
						if e.Kind == KindState {
							since, text := e.State(snap.Values)
							sum += uint64(since) + uint64(len(text))
						} else {
							sum += e.Bits(snap.Values)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
				if sum == 0 {
					b.Fatal("nothing read")
				}
			}
			b.Run("read", func(b *testing.B) { read(b, r.Read) })
			// What the agent does between inotify events: no system call.
			b.Run("unchanged", func(b *testing.B) { read(b, r.ReadUnchanged) })
		})
	}
}

func BenchmarkParseMeta(b *testing.B) {
	c := NewCollection(Options{})
	for i := range 100 {
		Must(c.Counter(map[string]string{"metric": "requests", "handler": "h" + strconv.Itoa(i)}))
	}
	meta, _, _ := layoutMetrics(c.metrics)
	b.SetBytes(int64(len(meta)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMeta("bench", meta); err != nil {
			b.Fatal(err)
		}
	}
}
