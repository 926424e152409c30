package history

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// TestConcurrentReadersWriterSave runs the writer flat out (new series, gaps, segment closes,
// expiry with ID reuse) while readers query and another goroutine saves snapshots. Run with
// -race. Every value written is a function of (series number, scan time), so readers can check
// each point they get is exactly what was written for it.
func TestConcurrentReadersWriterSave(t *testing.T) {
	s := New(Options{BlockScans: 8, Retention: 40 * time.Second})
	dir := filepath.Join(t.TempDir(), "history")
	saver := NewSaver(dir, s)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var scans atomic.Int64
	value := func(key string, ts int64) uint64 {
		var n int64
		fmt.Sscanf(key, "s%d", &n)
		return uint64(n*1_000_003 + ts)
	}
	var bad atomic.Int64
	var checked atomic.Int64
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			var buf []Point
			for ctx.Err() == nil {
				s.Each(func(id ID, key string, kind series.Kind) bool {
					born := s.meta(id)
					if born == nil || born.key != key {
						return true // deleted or reused meanwhile
					}
					s.Range(id, math.MinInt64, math.MaxInt64, func(ts int64, bits uint64) bool {
						if m := s.meta(id); m != nil && m.key == key && bits != value(key, ts) {
							bad.Add(1)
						}
						checked.Add(1)
						return true
					})
					buf = s.Last(id, 5, buf[:0])
					for i := 1; i < len(buf); i++ {
						if buf[i].TS <= buf[i-1].TS {
							bad.Add(1)
						}
					}
					s.Latest(id)
					return r%2 == 0 || id < 20
				})
				_ = s.Stats()
			}
		}(r)
	}
	wg.Add(1)
	var saves atomic.Int64
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := saver.Save(); err != nil {
				t.Error(err)
				return
			}
			saves.Add(1)
		}
	}()

	ts := int64(1_000_000)
	deadline := time.Now().Add(2 * time.Second)
	for j := 0; time.Now().Before(deadline) || saves.Load() < 3; j++ {
		ts += 1000
		s.Begin(ts)
		for n := 0; n < 60; n++ {
			if (n+j)%11 == 0 || (n >= 30 && (j/50)%2 == 1) {
				continue // gaps, and half of the series dying and coming back
			}
			key := fmt.Sprintf("s%d", n)
			id, err := s.Series(key, series.Counter)
			if err != nil {
				t.Fatal(err)
			}
			s.Add(id, value(key, ts))
		}
		s.Commit()
		s.Expire()
		scans.Add(1)
	}
	cancel()
	wg.Wait()
	// The agent's shutdown: a last save after the last Commit.
	if _, err := saver.Save(); err != nil {
		t.Fatal(err)
	}
	if bad.Load() != 0 {
		t.Fatalf("readers saw %d wrong points", bad.Load())
	}
	if checked.Load() == 0 {
		t.Fatal("readers checked no point")
	}
	loaded, _, err := LoadDir(dir, "", Options{BlockScans: 8, Retention: 40 * time.Second, Now: func() time.Time { return time.UnixMilli(ts) }})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	loaded.Each(func(id ID, key string, kind series.Kind) bool {
		loaded.Range(id, math.MinInt64, math.MaxInt64, func(ts int64, bits uint64) bool {
			if bits != value(key, ts) {
				t.Errorf("loaded %s at %d = %d; want %d", key, ts, bits, value(key, ts))
			}
			n++
			return true
		})
		// The shutdown save lost nothing: the loaded series has every point of the original.
		if oid, _, ok := s.Lookup(key); !ok || len(rangeAll(s, oid, math.MinInt64, math.MaxInt64)) != len(rangeAll(loaded, id, math.MinInt64, math.MaxInt64)) {
			t.Errorf("%s: loaded points differ from the saved store's", key)
		}
		return true
	})
	if a, b := s.Stats(), loaded.Stats(); a.Series != b.Series {
		t.Errorf("saved %d series, loaded %d", a.Series, b.Series)
	}
	t.Logf("%d scans, %d saves, %d points checked by readers, %d points in the last snapshot", scans.Load(), saves.Load(), checked.Load(), n)
	if n == 0 {
		t.Fatal("the last snapshot has no point")
	}
}
