package history

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// samePoints fails unless every series of a with points is in b with the same kind and points,
// and b has no series with points that a lacks.
func samePoints(t *testing.T, a, b *Store) {
	t.Helper()
	n, _ := diffPoints(t, a, b, "saved", "loaded", false)
	b.Each(func(id ID, key string, kind series.Kind) bool {
		if len(rangeAll(b, id, math.MinInt64, math.MaxInt64)) > 0 {
			n--
		}
		return true
	})
	if n != 0 {
		t.Errorf("the loaded store has %d series with points fewer than the saved one", n)
	}
}

// dirFiles returns the names in dir, sorted.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func countPrefix(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func mustSave(t *testing.T, sv *Saver) SaveStats {
	t.Helper()
	st, err := sv.Save()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func nowAt(ms int64) func() time.Time { return func() time.Time { return time.UnixMilli(ms) } }

// reloaded saves s into a new directory and returns the store LoadDir makes of it with opt.
func reloaded(t *testing.T, s *Store, opt Options) *Store {
	t.Helper()
	dir := t.TempDir()
	mustSave(t, NewSaver(dir, s))
	s2, _, err := LoadDir(dir, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	return s2
}

func TestSaverRoundTrip(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	s := sampleStore(ts0) // 3 closed segments and 6 scans in the open one
	dir := filepath.Join(t.TempDir(), "history")
	sv := NewSaver(dir, s)
	st := mustSave(t, sv)
	if st.Segments != 3 || !st.KeysRewritten {
		t.Errorf("first save %+v; want 3 segments and the series table", st)
	}
	if got := dirFiles(t, dir); countPrefix(got, "seg-") != 3 || len(got) != 6 {
		t.Errorf("directory holds %v; want HEAD, 3 segments, the series base and log", got)
	}
	s2, sv2, err := LoadDir(dir, "", Options{Now: nowAt(ts0 + 60_000)})
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, s, s2)
	// Same IDs.
	s.Each(func(id ID, key string, _ series.Kind) bool {
		if id2, _, ok := s2.Lookup(key); !ok || id2 != id {
			t.Errorf("%s: ID %d before the save, %d (found %v) after the load", key, id, id2, ok)
		}
		return true
	})
	// Saving the loaded store rewrites nothing but HEAD.
	st = mustSave(t, sv2)
	if st.Segments != 0 || st.KeysRewritten {
		t.Errorf("save after load %+v; want only HEAD", st)
	}
	// The loaded store keeps going: scans close a segment, which the next save writes alone.
	id, _, _ := s2.Lookup(`{"metric":"c"}`)
	for j := int64(30); j < 34; j++ {
		s2.Begin(ts0 + j*2000)
		s2.Add(id, uint64(j*j))
		s2.Commit()
	}
	st = mustSave(t, sv2)
	if st.Segments != 1 || st.KeysRewritten {
		t.Errorf("save after a segment closed %+v; want 1 segment", st)
	}
	s3, _, err := LoadDir(dir, "", Options{Now: nowAt(ts0 + 90_000)})
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, s2, s3)
}

func TestSaverIncremental(t *testing.T) {
	s := New(Options{BlockScans: 8})
	dir := t.TempDir()
	sv := NewSaver(dir, s)
	ts := int64(1_000_000)
	var ids []ID
	for i := range 100 {
		id, _ := s.Series("s"+strconv.Itoa(i), series.Level)
		ids = append(ids, id)
	}
	scan := func() {
		ts += 1000
		s.Begin(ts)
		for i, id := range ids {
			s.Add(id, uint64(i))
		}
		s.Commit()
	}
	for range 20 {
		scan()
	}
	first := mustSave(t, sv)
	if first.Segments != 2 || !first.KeysRewritten {
		t.Fatalf("first save %+v", first)
	}
	// Nothing new: only HEAD (with the open segment) is written.
	again := mustSave(t, sv)
	if again.Segments != 0 || again.KeysRewritten || again.Bytes >= first.Bytes/4 {
		t.Errorf("save without changes %+v (first %+v); want HEAD alone", again, first)
	}
	// One new series: a log batch, not a new table.
	id, _ := s.Series("new", series.Counter)
	ids = append(ids, id)
	scan()
	st := mustSave(t, sv)
	if st.Segments != 0 || st.KeysRewritten || st.Bytes > again.Bytes+64 {
		t.Errorf("save after one new series %+v (previous %+v); want HEAD and a small log batch", st, again)
	}
	// Many new series: the log outgrows the table, which is compacted. (Keys that share
	// nothing with each other: front coding would make 5000 similar ones too small a log.)
	for i := range 5000 {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		id, _ := s.Series(strings.Repeat(hex.EncodeToString(sum[:]), 2), series.Level)
		ids = append(ids, id)
	}
	scan()
	if st = mustSave(t, sv); !st.KeysRewritten {
		t.Errorf("save after 5000 new series %+v; want the table rewritten", st)
	}
	if got := dirFiles(t, dir); countPrefix(got, "keys-") != 2 || countPrefix(got, "seg-") != 2 {
		t.Errorf("directory after compaction %v; want one series base and log, 2 segments", got)
	}
	s2, _, err := LoadDir(dir, "", Options{Now: nowAt(ts)})
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, s, s2)
}

// TestSaverIDReuse: an ID dropped and given to another series between two saves; the new
// holder must not inherit the points the old one left in closed segments, in the open segment
// or in the snapshot.
func TestSaverIDReuse(t *testing.T) {
	s := New(Options{BlockScans: 8})
	dir := t.TempDir()
	sv := NewSaver(dir, s)
	a, _ := s.Series("a", series.Counter)
	b, _ := s.Series("b", series.Counter)
	ts := int64(1_000_000)
	for j := 0; j < 10; j++ { // scans 0-7 closed, 8-9 open
		ts += 1000
		s.Begin(ts)
		s.Add(a, uint64(j))
		s.Add(b, uint64(100+j))
		s.Commit()
	}
	mustSave(t, sv)
	if !s.Drop(b) {
		t.Fatal("Drop(b) failed")
	}
	c, _ := s.Series("c", series.Level)
	if c != b {
		t.Fatalf("c got ID %d; the test wants b's %d", c, b)
	}
	for j := 10; j < 20; j++ { // closes the segment holding b's and c's points
		ts += 1000
		s.Begin(ts)
		s.Add(a, uint64(j))
		s.Add(c, uint64(1000+j))
		s.Commit()
	}
	st := mustSave(t, sv)
	if st.KeysRewritten {
		t.Errorf("save after the reuse %+v; want a log batch", st)
	}
	s2, sv2, err := LoadDir(dir, "", Options{Now: nowAt(ts)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s2.Lookup("b"); ok {
		t.Error("dropped series b came back")
	}
	id, kind, ok := s2.Lookup("c")
	if !ok || kind != series.Level || id != c {
		t.Fatalf("Lookup(c) = %d, %v, %v; want ID %d", id, kind, ok, c)
	}
	pts := rangeAll(s2, id, math.MinInt64, math.MaxInt64)
	if len(pts) != 10 || pts[0].Bits != 1010 {
		t.Errorf("c after load: %v; want its 10 points from 1010", pts)
	}
	samePoints(t, s, s2)

	// The loaded store reuses free IDs too, and keeps saving incrementally.
	if !s2.Drop(id) {
		t.Fatal("Drop(c) failed")
	}
	d, _ := s2.Series("d", series.Float)
	s2.Begin(ts + 1000)
	s2.Add(d, math.Float64bits(0.5))
	s2.Commit()
	mustSave(t, sv2)
	s3, _, err := LoadDir(dir, "", Options{Now: nowAt(ts + 1000)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s3.Lookup("c"); ok {
		t.Error("dropped series c came back")
	}
	id, _, _ = s3.Lookup("d")
	if pts := rangeAll(s3, id, math.MinInt64, math.MaxInt64); len(pts) != 1 || pts[0].Bits != math.Float64bits(0.5) {
		t.Errorf("d after load: %v; want its one point", pts)
	}
	samePoints(t, s2, s3)
}

// TestSaverProperty drives a store through random scans, gaps, new series, drops and expiry,
// saving at random moments and checking that what loads is what was saved.
func TestSaverProperty(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			opt := Options{BlockScans: 1 + r.IntN(12), Retention: time.Duration(5+r.IntN(60)) * time.Second}
			s := New(opt)
			dir := t.TempDir()
			sv := NewSaver(dir, s)
			ts := int64(1_000_000)
			live := map[string]ID{}
			for step := 0; step < 300; step++ {
				for range r.IntN(4) {
					n := r.IntN(60)
					key := "s" + strconv.Itoa(n)
					if id, err := s.Series(key, []series.Kind{series.Counter, series.Level, series.Float}[n%3]); err == nil {
						live[key] = id
					}
				}
				if r.IntN(10) == 0 {
					for key, id := range live {
						s.Drop(id)
						delete(live, key)
						break
					}
				}
				ts += int64(500 + r.IntN(2000))
				s.Begin(ts)
				for key, id := range live {
					if r.IntN(5) != 0 {
						s.Add(id, uint64(ts)+uint64(len(key)))
					}
				}
				s.Commit()
				for _, key := range s.Expire() {
					delete(live, key)
				}
				if r.IntN(15) == 0 {
					mustSave(t, sv)
				}
				if r.IntN(40) == 0 {
					mustSave(t, sv)
					s2, sv2, err := LoadDir(dir, "", Options{BlockScans: opt.BlockScans, Retention: opt.Retention, Now: nowAt(ts)})
					if err != nil {
						t.Fatal(err)
					}
					samePoints(t, s, s2)
					names := dirFiles(t, dir)
					if got, want := countPrefix(names, "seg-"), s.Stats().Segments; got != want {
						t.Errorf("step %d: %d segment files for %d segments: %v", step, got, want, names)
					}
					if r.IntN(2) == 0 {
						// Continue with the loaded store and its Saver, as after a restart.
						s, sv = s2, sv2
						live = map[string]ID{}
						s.Each(func(id ID, key string, kind series.Kind) bool {
							live[key] = id
							return true
						})
					}
				}
			}
		})
	}
}

// savedDir returns a directory holding the snapshot of sampleStore(ts0) (3 segments).
func savedDir(t *testing.T, ts0 int64) (string, *Store) {
	t.Helper()
	s := sampleStore(ts0)
	dir := t.TempDir()
	mustSave(t, NewSaver(dir, s))
	return dir, s
}

func TestLoadDirDamage(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	opt := Options{Now: nowAt(ts0 + 60_000)}
	aside := ".corrupt-1800000060"
	segName := headSeg{first: ts0 + 8*2000}.name() // the second segment

	for _, tc := range []struct {
		name   string
		damage func(dir string) error
		moved  []string // files moved aside
		empty  bool     // the store starts empty; otherwise only the second segment is lost
	}{
		{"segment flipped", func(dir string) error { return flipFile(filepath.Join(dir, segName), 40) }, []string{segName}, false},
		{"segment truncated", func(dir string) error { return os.Truncate(filepath.Join(dir, segName), 30) }, []string{segName}, false},
		{"segment missing", func(dir string) error { return os.Remove(filepath.Join(dir, segName)) }, nil, false},
		{"segment swapped", func(dir string) error {
			return copyFile(filepath.Join(dir, headSeg{first: ts0}.name()), filepath.Join(dir, segName))
		}, []string{segName}, false},
		{"head flipped", func(dir string) error { return flipFile(filepath.Join(dir, headName), 12) }, []string{headName}, true},
		{"head truncated", func(dir string) error { return os.Truncate(filepath.Join(dir, headName), 5) }, []string{headName}, true},
		{"keys flipped", func(dir string) error { return flipFile(filepath.Join(dir, keysBaseName(1)), 10) }, []string{headName, keysBaseName(1)}, true},
		{"keys missing", func(dir string) error { return os.Remove(filepath.Join(dir, keysBaseName(1))) }, []string{headName}, true},
		{"log truncated", func(dir string) error { return os.Truncate(filepath.Join(dir, keysLogName(1)), 3) }, []string{headName, keysLogName(1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, orig := savedDir(t, ts0)
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			s, sv, err := LoadDir(dir, "", opt)
			if !errors.Is(err, ErrCorrupt) || s == nil || sv == nil {
				t.Fatalf("LoadDir = %v, %v; want a store and ErrCorrupt", s, err)
			}
			for _, name := range tc.moved {
				if _, serr := os.Stat(filepath.Join(dir, name+aside)); serr != nil || !strings.Contains(err.Error(), name+aside) {
					t.Errorf("%s not moved aside (%v); error %v", name, serr, err)
				}
			}
			st := s.Stats()
			if tc.empty && st.Series != 0 {
				t.Errorf("store after damage %+v; want empty", st)
			}
			if !tc.empty && (st.Segments != 2 || st.Points != orig.Stats().Points-int64(orig.view.Load().segs[1].points)) {
				t.Errorf("store after damage %+v; want all but the second segment", st)
			}
			// The agent goes on: the next save makes a loadable snapshot without the damage.
			mustSave(t, sv)
			s2, _, err := LoadDir(dir, "", opt)
			if err != nil {
				t.Fatal(err)
			}
			sameStores(t, s, s2)
			for _, name := range dirFiles(t, dir) {
				if ownedName(name) && !strings.HasPrefix(name, "seg-") && !strings.HasPrefix(name, "keys-") {
					t.Errorf("leftover %s", name)
				}
			}
		})
	}
}

func flipFile(path string, i int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b[i] ^= 0x20
	return os.WriteFile(path, b, 0o644)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// TestSaverCrashLeftovers: what a crash can leave (a temporary file, a segment written but not
// yet named by HEAD, a log batch past the committed length) is ignored by LoadDir and cleaned
// by the next Save; a Save that fails leaves the previous snapshot loadable.
func TestSaverCrashLeftovers(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	opt := Options{Now: nowAt(ts0 + 60_000)}
	dir, orig := savedDir(t, ts0)
	logPath := filepath.Join(dir, keysLogName(1))
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{9, 's', 1, 2, 3}) // half a batch
	f.Close()
	for _, name := range []string{"HEAD.tmp", "seg-5.hseg", "keys-7.hkb", "seg-6.hseg.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, sv, err := LoadDir(dir, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, orig, s)

	// A save that cannot write HEAD fails and changes nothing that loads.
	if err := os.Remove(filepath.Join(dir, "HEAD.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "HEAD.tmp", "x"), 0o755); err != nil { // not a file
		t.Fatal(err)
	}
	id, _ := s.Series("new", series.Counter)
	for j := int64(30); j < 34; j++ { // closes a segment
		s.Begin(ts0 + j*2000)
		s.Add(id, uint64(j))
		s.Commit()
	}
	if _, err := sv.Save(); err == nil {
		t.Fatal("Save with HEAD.tmp a directory succeeded")
	}
	s2, _, err := LoadDir(dir, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, orig, s2)

	if err := os.RemoveAll(filepath.Join(dir, "HEAD.tmp")); err != nil {
		t.Fatal(err)
	}
	st := mustSave(t, sv) // retries the segment, appends to the log past the junk
	if st.Segments != 1 || st.KeysRewritten {
		t.Errorf("retried save %+v; want the new segment and a log batch", st)
	}
	want := []string{"HEAD", keysBaseName(1), keysLogName(1), "notes.txt"}
	for i := 0; i < 4; i++ {
		want = append(want, headSeg{first: ts0 + int64(i)*8*2000}.name())
	}
	sort.Strings(want)
	if got := dirFiles(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("directory %v; want %v", got, want)
	}
	s3, _, err := LoadDir(dir, "", Options{Now: nowAt(ts0 + 90_000)})
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, s, s3)
}

// TestSaverExpiry: segments past the retention lose their files at the next save, and a
// snapshot loaded later than the retention allows is empty.
func TestSaverExpiry(t *testing.T) {
	s := New(Options{BlockScans: 4, Retention: 20 * time.Second})
	dir := t.TempDir()
	sv := NewSaver(dir, s)
	id, _ := s.Series("x", series.Counter)
	ts := int64(1_000_000)
	for j := 0; j < 100; j++ {
		ts += 1000
		s.Begin(ts)
		s.Add(id, uint64(j))
		s.Commit()
		s.Expire()
		if j%7 == 0 {
			mustSave(t, sv)
		}
	}
	mustSave(t, sv)
	if got, want := countPrefix(dirFiles(t, dir), "seg-"), s.Stats().Segments; got != want || want > 6 {
		t.Errorf("%d segment files, %d segments", got, want)
	}
	s2, _, err := LoadDir(dir, "", Options{Retention: 20 * time.Second, Now: nowAt(ts + 3600_000)})
	if err != nil || s2.Stats().Series != 0 || s2.Stats().Points != 0 {
		t.Errorf("LoadDir an hour later = %+v, %v; want empty", s2.Stats(), err)
	}
}
