// Package histread is the one history reader of the shippers (carbon, remote write): both send
// the held history from a position, so both read every series' points in a window of scan
// times, series by series, from a Source (*history.Store). It keeps the parsed labels of the
// series asked for between reads, so a shipper that reads every scan parses a series' key once,
// not once a scan.
//
// Concurrency: a Reader is used by one goroutine (its shipper's); the Source must be safe to
// read while the agent's scan goroutine writes it (history.Store is).
package histread

import (
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// Source is the held history; *history.Store satisfies it.
type Source interface {
	// Each calls fn for every series held until fn returns false.
	Each(fn func(id history.ID, key string, kind series.Kind) bool)
	// Range calls fn for the points of id with times in [fromMs, toMs], oldest first, until fn
	// returns false.
	Range(id history.ID, fromMs, toMs int64, fn func(tsMs int64, bits uint64) bool)
	Stats() history.Stats
	// BackfillFrom is the time at or before which no scan changes any more (a late pushed
	// point lands only after it).
	BackfillFrom() int64
}

// Series is one series as Read shows it. It is valid during the callback only.
type Series struct {
	ID   history.ID
	Key  string
	Kind series.Kind
	r    *Reader
}

// Labels returns the series' labels, parsed from its key once and kept by the Reader (nil when
// the key does not parse: such a series is never sent). The map is the Reader's: read it, do
// not change or keep it. A shipper that keeps what it derives from the labels per ID calls it
// only for series new to it.
func (s *Series) Labels() series.Labels {
	if s.r == nil { // a Series made outside Read (a test's)
		return parseKey(s.Key)
	}
	return s.r.labelsOf(s.ID, s.Key)
}

// parseKey is series.ParseKey, nil for a key that does not parse.
func parseKey(key string) series.Labels {
	l, err := series.ParseKey(key)
	if err != nil {
		return nil
	}
	return l
}

// Reader reads a Source for one shipper. Build it with New.
type Reader struct {
	src    Source
	labels map[history.ID]*parsed
	gen    uint32
	used   int // labels entries used by the read under way
	pts    []history.Point

	// The read under way (Read's state, kept here so that rangeFn is made once).
	limit   int
	cut     int64
	rangeFn func(ts int64, bits uint64) bool
}

type parsed struct {
	key    string
	labels series.Labels
	gen    uint32
}

// New returns a Reader of src.
func New(src Source) *Reader {
	r := &Reader{src: src, labels: map[history.ID]*parsed{}}
	r.rangeFn = func(ts int64, bits uint64) bool {
		r.pts = append(r.pts, history.Point{TS: ts, Bits: bits})
		if r.limit > 0 && len(r.pts) >= r.limit {
			r.cut = min(r.cut, ts)
			return false
		}
		return true
	}
	return r
}

// Span returns the scan times (unix ms) of the oldest and the newest scan held, 0 when none.
func (r *Reader) Span() (oldestMs, newestMs int64) {
	st := r.src.Stats()
	return st.OldestMs, st.LatestMs
}

// Final is the last scan time that can no longer change (Source.BackfillFrom).
func (r *Reader) Final() int64 { return r.src.BackfillFrom() }

// Read calls want for every series held, and fn for each series want takes that has points
// in its window, with those points oldest first, until fn returns false. The window is
// [from, to]; want may start a series' window earlier (lo < from: a shipper resending late
// points), or skip the series without reading it (ok false). With limit > 0 at most limit
// points of a series are read, and Read returns the earliest time at which a series reached
// its limit (the caller drops the points after it: the next window reads them again); else to.
// s and pts are the Reader's: valid during the callback only.
func (r *Reader) Read(from, to int64, limit int, want func(s *Series) (lo int64, ok bool), fn func(s *Series, pts []history.Point) bool) int64 {
	r.gen++
	r.used = 0
	r.limit, r.cut = limit, to
	var s Series
	r.src.Each(func(id history.ID, key string, kind series.Kind) bool {
		s = Series{ID: id, Key: key, Kind: kind, r: r}
		lo, ok := want(&s)
		if !ok {
			return true
		}
		r.pts = r.pts[:0]
		r.src.Range(id, min(lo, from), to, r.rangeFn)
		if len(r.pts) == 0 {
			return true
		}
		return fn(&s, r.pts)
	})
	// Forget the labels of series no longer held (or no longer asked for).
	if len(r.labels) > 2*r.used+1024 {
		for id, p := range r.labels {
			if p.gen != r.gen {
				delete(r.labels, id)
			}
		}
	}
	if cap(r.pts) > 1<<16 {
		r.pts = nil
	}
	return r.cut
}

// labelsOf returns the parsed labels of series id, parsing its key when the ID is new or
// re-used by another series.
func (r *Reader) labelsOf(id history.ID, key string) series.Labels {
	p := r.labels[id]
	if p == nil || p.key != key {
		p = &parsed{key: key, labels: parseKey(key)}
		r.labels[id] = p
	}
	if p.gen != r.gen {
		p.gen = r.gen
		r.used++
	}
	return p.labels
}
