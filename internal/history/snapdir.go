package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cantal-go/cantal/internal/atomicfile"
	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// Saver keeps a Store's snapshot in a directory and brings it up to date incrementally.
//
// Writing the whole hour at every save (as the single-file snapshots of pre-release agents did)
// would cost, at 100k series, about 200 MB and 140 ms of CPU per save, once a minute, while
// almost all of it (the closed segments) never changes. So a snapshot directory holds (format
// in snapcodec.go):
//
//   - one file per closed segment, written once when the segment is first saved and deleted by
//     the first save after it expires (segments are immutable, so a file never changes);
//   - the series table as a base file plus an append-only log of the IDs that changed holder
//     between saves: an unchanged table costs nothing, churn costs its own size; the log is
//     compacted into a new base once it outgrows the base (at least 256 KiB), so loading
//     replays at most about twice the table;
//   - HEAD, rewritten atomically (temporary file, fsync, rename, fsync of the directory) by
//     every save: the names, sizes and checksums of the files above, the log's committed
//     length, and the open segment's committed scans, compressed.
//
// Files are made durable (fsync, then an fsync of the directory) before the HEAD that names
// them is renamed into place, and a log batch is appended after the committed length, so a
// crash at any point leaves the previous or the new HEAD, each naming complete files. Files
// no HEAD names (expired segments, older series tables, leftovers of a crash) are deleted
// after the HEAD is in place.
//
// Series keep their IDs across a save and a load (segment blocks are indexed by ID), and an
// ID's points older than its holder's born time belong to an earlier holder, as in memory.
//
// A Saver owns its directory and remembers what it wrote there; use one Saver per directory
// and Store. It is not safe for concurrent use: one Save at a time. Save is a Store reader,
// so it may run on any goroutine while the Store's writer appends.
type Saver struct {
	dir string
	s   *Store

	// What the current HEAD names.
	segs     map[*segment]headSeg
	keys     []*meta // series table by ID
	gen      uint64  // of the series table files; 0: none yet
	baseSize int64
	baseCRC  uint32
	logLen   int64

	nextGen uint64
	oldKeys bool             // the series table was loaded from version 2 files: rewrite it whole
	cur     []*meta          // scratch for the next table
	batch   []byte           // scratch for a log batch
	base    []byte           // scratch for a base file
	enc     chunkenc.Encoder // scratch for the open segment
	sw      segWriter
}

// SaveStats describes one Save.
type SaveStats struct {
	Segments      int   // segment files written
	KeysRewritten bool  // the series table was written whole (first save or compaction)
	Bytes         int64 // bytes written, every file included
}

// minCompact is the log size below which the series log is never compacted.
const minCompact = 256 << 10

const (
	headName  = "HEAD"
	tmpSuffix = atomicfile.TempSuffix
)

// NewSaver returns a Saver that keeps s's snapshot in dir, which need not exist. The first
// Save writes everything and deletes what an earlier snapshot left in dir; use LoadDir instead
// to continue a snapshot.
func NewSaver(dir string, s *Store) *Saver {
	return &Saver{dir: dir, s: s, segs: map[*segment]headSeg{}, nextGen: 1}
}

// Dir returns the directory sv saves into.
func (sv *Saver) Dir() string { return sv.dir }

// Save brings the snapshot in the directory up to date with the Store: it writes the segments
// closed since the last Save, the series table's changes and a new HEAD, then deletes the files
// the new HEAD does not name (and the v1 snapshot file LoadDir was given, if any). The snapshot
// is consistent as of the latest committed scan when Save starts. On error the previous
// snapshot stays loadable and the next Save retries what is missing.
func (sv *Saver) Save() (SaveStats, error) {
	var st SaveStats
	s := sv.s
	if err := os.MkdirAll(sv.dir, 0o750); err != nil {
		return st, fmt.Errorf("save history: %w", err)
	}

	// One consistent view: the committed count before the table, so that every point below n
	// belongs to a series in cur or to an earlier holder of its ID (filtered by born).
	v := s.acquire()
	n := int(v.open.n.Load())
	t := s.metas.Load()
	cur := sv.cur[:0]
	for i := range t.m {
		cur = append(cur, t.m[i].Load())
	}
	for len(cur) > 0 && cur[len(cur)-1] == nil {
		cur = cur[:len(cur)-1]
	}
	sv.cur = cur
	h := &head{scans: s.scans}
	if n > 0 {
		h.open = compressStaging(v.open, n, cur, &sv.enc, &sv.sw)
	}
	s.release(v)

	// Closed segments not written yet.
	h.segs = make([]headSeg, len(v.segs))
	segs := make(map[*segment]headSeg, len(v.segs))
	newFiles := false
	for i, g := range v.segs {
		hs, ok := sv.segs[g]
		if !ok {
			var err error
			if hs, err = writeSegFile(sv.dir, g); err != nil {
				return st, err
			}
			st.Segments++
			st.Bytes += hs.size
			newFiles = true
		}
		h.segs[i] = hs
		segs[g] = hs
	}

	// The series table: a log batch of the changes, or a whole new base.
	h.gen, h.baseSize, h.baseCRC, h.logLen = sv.gen, sv.baseSize, sv.baseCRC, sv.logLen
	compact := sv.gen == 0 || sv.oldKeys
	if !compact {
		batch, changed := appendLogBatch(sv.batch[:0], sv.keys, cur)
		sv.batch = batch
		switch {
		case !changed:
		case h.logLen+int64(len(batch)) > max(minCompact, h.baseSize):
			compact = true
		default:
			if err := appendLog(filepath.Join(sv.dir, keysLogName(sv.gen)), h.logLen, batch); err != nil {
				compact = true // a damaged or missing log: start a new table instead
			} else {
				h.logLen += int64(len(batch))
				st.Bytes += int64(len(batch))
			}
		}
	}
	if compact {
		gen := sv.nextGen
		sv.nextGen++
		base := appendBase(sv.base[:0], cur)
		sv.base = base
		if _, err := writeFile(sv.dir, keysBaseName(gen), base); err != nil {
			return st, err
		}
		lh := logHeader()
		if _, err := writeFile(sv.dir, keysLogName(gen), lh); err != nil {
			return st, err
		}
		h.gen, h.baseSize, h.baseCRC, h.logLen = gen, int64(len(base)), binary.LittleEndian.Uint32(base[len(base)-4:]), int64(len(lh))
		st.KeysRewritten = true
		st.Bytes += int64(len(base) + len(lh))
		newFiles = true
	}
	if newFiles {
		// The new files' directory entries are durable before a HEAD names them.
		if err := syncDir(sv.dir); err != nil {
			return st, err
		}
	}

	size, err := writeFile(sv.dir, headName, encodeHead(h)...)
	if err != nil {
		return st, err
	}
	if err := syncDir(sv.dir); err != nil {
		return st, err
	}
	st.Bytes += size

	// Committed: remember what HEAD names and delete the rest.
	sv.segs = segs
	sv.keys, sv.cur = cur, sv.keys[:0]
	sv.gen, sv.baseSize, sv.baseCRC, sv.logLen = h.gen, h.baseSize, h.baseCRC, h.logLen
	sv.oldKeys = false
	sv.cleanup(h)
	return st, nil
}

// cleanup deletes the files of the snapshot directory that h does not name. Failures are left for the next save to retry: the snapshot is complete without them.
func (sv *Saver) cleanup(h *head) {
	keep := map[string]bool{headName: true, keysBaseName(h.gen): true, keysLogName(h.gen): true}
	for _, s := range h.segs {
		keep[s.name()] = true
	}
	ents, err := os.ReadDir(sv.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if keep[name] || !ownedName(name) {
			continue
		}
		os.Remove(filepath.Join(sv.dir, name))
	}
}

// ownedName reports whether name is one of the files a Saver writes (not a file moved aside
// as corrupt, nor anything else someone put there).
func ownedName(name string) bool {
	if strings.HasSuffix(name, tmpSuffix) {
		return true
	}
	return strings.HasPrefix(name, "seg-") && strings.HasSuffix(name, ".hseg") ||
		strings.HasPrefix(name, "keys-") && (strings.HasSuffix(name, ".hkb") || strings.HasSuffix(name, ".hkl"))
}

// writeSegFile writes g to its own file and returns its HEAD entry.
func writeSegFile(dir string, g *segment) (headSeg, error) {
	parts, hs := segFileParts(g)
	size, err := writeFile(dir, hs.name(), parts...)
	hs.size = size
	return hs, err
}

// writeFile writes parts to dir/name atomically (atomicfile.Write). The caller syncs the
// directory, once for the files of a save.
func writeFile(dir, name string, parts ...[]byte) (int64, error) {
	size, err := atomicfile.Write(filepath.Join(dir, name), atomicfile.Options{Perm: 0o640, NoDirSync: true}, parts...)
	if err != nil {
		return 0, fmt.Errorf("save history: %w", err)
	}
	return size, nil
}

// appendLog writes batch at offset off of the log at path (dropping whatever a failed save
// left beyond off) and fsyncs it.
func appendLog(path string, off int64, batch []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	if fi.Size() < off {
		return fmt.Errorf("save history: %s: %d bytes, want at least %d", path, fi.Size(), off)
	}
	if fi.Size() > off {
		if err := f.Truncate(off); err != nil {
			return fmt.Errorf("save history: %w", err)
		}
	}
	if _, err := f.WriteAt(batch, off); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save history %s: %w", path, err)
	}
	return f.Close()
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	return nil
}

// LoadDir loads the snapshot a Saver keeps in dir and returns the Store with a Saver that
// continues it. Scans older than opt.Retention before opt.Now are dropped, with the series left
// without any point. Series keep the IDs they had when saved.
//
// v1 names where pre-release agents kept a single-file snapshot (format version 1, before
// snapshot directories; "": nowhere). That format is no longer read: a file there is refused
// with an error naming it, and left as it is for the operator to remove; the directory loads
// as without it (nothing else is lost) and no Save touches it.
//
// Damage never stops the agent: LoadDir always returns a usable Store and Saver, with an error
// to log. A corrupt or truncated HEAD or series table is moved aside (renamed to
// name.corrupt-<unix seconds>) with the HEAD, and the Store starts empty; a corrupt, truncated
// or missing segment file is moved aside and only its scans are lost (segments are independent
// of each other, so the rest stays consistent). Errors about damage wrap ErrCorrupt; other read
// errors leave the files in place (the next Save replaces them).
func LoadDir(dir, v1 string, opt Options) (*Store, *Saver, error) {
	s, sv, err := loadDir(dir, opt)
	return s, sv, errors.Join(err, refuseV1(v1))
}

// refuseV1 is the error for a version 1 snapshot file at path, nil when there is none.
func refuseV1(path string) error {
	if path == "" {
		return nil
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("load history: %s is a single-file snapshot of pre-release agents (format version 1), no longer read: its points are not loaded; remove the file", path)
}

func loadDir(dir string, opt Options) (*Store, *Saver, error) {
	opt = opt.withDefaults()
	sv := &Saver{dir: dir, segs: map[*segment]headSeg{}, nextGen: 1}
	hb, err := readAll(filepath.Join(dir, headName), -1)
	if errors.Is(err, fs.ErrNotExist) {
		sv.s = New(opt)
		return sv.s, sv, nil
	}
	if err != nil {
		sv.s = New(opt)
		return sv.s, sv, fmt.Errorf("load history %s: %w", dir, err)
	}
	s, err := sv.load(hb, opt)
	if s == nil {
		s = New(opt)
		sv.keys, sv.gen, sv.segs = nil, 0, map[*segment]headSeg{}
	}
	sv.s = s
	if err != nil {
		return s, sv, fmt.Errorf("load history %s: %w", dir, err)
	}
	return s, sv, nil
}

// load reads the snapshot whose HEAD is hb. A nil Store means nothing could be loaded.
func (sv *Saver) load(hb []byte, opt Options) (*Store, error) {
	now := opt.Now()
	headPath := filepath.Join(sv.dir, headName)
	h, err := parseHead(hb, nil)
	if err != nil {
		return nil, moveAside(err, now.Unix(), headPath)
	}
	sv.nextGen = h.gen + 1

	// The series table.
	basePath := filepath.Join(sv.dir, keysBaseName(h.gen))
	b, err := readAll(basePath, h.baseSize)
	if err == nil {
		var sum uint32
		if _, sum, err = checkCRC(b, "series table"); err == nil && sum != h.baseCRC {
			err = fmt.Errorf("%w: series table: checksum %08x, HEAD says %08x", ErrCorrupt, sum, h.baseCRC)
		}
	}
	var table []*meta
	if err == nil {
		table, err = parseBase(b)
	}
	if err != nil {
		return nil, damaged(err, now.Unix(), basePath, headPath)
	}
	logPath := filepath.Join(sv.dir, keysLogName(h.gen))
	b, err = readAll(logPath, -1)
	if err == nil && int64(len(b)) < h.logLen {
		err = fmt.Errorf("%w: series log: %d bytes, HEAD says %d", ErrCorrupt, len(b), h.logLen)
	}
	if err == nil {
		table, err = applyLog(table, b[:h.logLen])
	}
	if err == nil {
		seen := make(map[string]bool, len(table))
		for id, m := range table {
			if m != nil && seen[m.key] {
				err = fmt.Errorf("%w: series table: ID %d: duplicate key %q", ErrCorrupt, id, m.key)
				break
			}
			if m != nil {
				seen[m.key] = true
			}
		}
	}
	if err != nil {
		return nil, damaged(err, now.Unix(), logPath, headPath)
	}
	sv.keys = table
	sv.gen, sv.baseSize, sv.baseCRC, sv.logLen = h.gen, h.baseSize, h.baseCRC, h.logLen
	// A version 2 table is rewritten in the current format by the next save (a log is
	// appended to in its own version only).
	sv.oldKeys = b[len(logMagic)] != keysVersion

	// The segments: each stands alone, so a damaged one is dropped by itself.
	cutoff := now.UnixMilli() - opt.Retention.Milliseconds()
	last := make([]int64, len(table)) // newest point of each series in a closed segment
	for id, m := range table {
		if m != nil {
			last[id] = m.born
		}
	}
	type idLast struct {
		id ID
		ts int64
	}
	var pending []idLast
	each := func(id ID, ts []int64, d *chunkenc.Decoded) {
		if int(id) < len(table) && table[id] != nil {
			if t := ts[d.Idx[d.N-1]]; t >= table[id].born {
				pending = append(pending, idLast{id, t})
			}
		}
	}
	var errs []error
	var segs []*segment
	for i, hs := range h.segs {
		next := int64(1<<63 - 1) // the first scan after this segment
		if i+1 < len(h.segs) {
			next = h.segs[i+1].first
		} else if h.open != nil {
			next = h.open.ts[0]
		}
		if next <= cutoff {
			continue // stale: the next save deletes its file
		}
		path := filepath.Join(sv.dir, hs.name())
		b, err := readAll(path, hs.size)
		var g *segment
		if err == nil {
			pending = pending[:0]
			var sum uint32
			g, sum, err = parseSegFile(b, h.scans, each)
			switch {
			case err != nil:
			case sum != hs.crc:
				err = fmt.Errorf("%w: checksum %08x, HEAD says %08x", ErrCorrupt, sum, hs.crc)
			case g.first() != hs.first || g.last() >= next:
				err = fmt.Errorf("%w: scans %d..%d do not fit HEAD", ErrCorrupt, g.first(), g.last())
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("segment %s dropped: %w", hs.name(), damaged(err, now.Unix(), path)))
			continue
		}
		if g.last() < cutoff {
			continue
		}
		for _, p := range pending {
			last[p.id] = max(last[p.id], p.ts)
		}
		segs = append(segs, g)
		sv.segs[g] = hs
	}
	open := h.open
	if open != nil && open.last() < cutoff {
		open = nil
	}

	// Keep the series with a point in what is left, or born recently.
	oldest := cutoff
	if len(segs) > 0 {
		oldest = min(oldest, segs[0].first())
	} else if open != nil {
		oldest = min(oldest, open.first())
	}
	live := make([]*meta, len(table))
	for id, m := range table {
		if m != nil && last[id] >= oldest {
			live[id] = m
		}
	}
	if open != nil {
		var d chunkenc.Decoded
		it := segIter{g: open}
		for id, m := range table {
			if m == nil || live[id] != nil {
				continue
			}
			if blk := it.block(ID(id)); blk != nil && chunkenc.Decode(blk, len(open.ts), &d) == nil && d.N > 0 &&
				open.ts[d.Idx[d.N-1]] >= m.born {
				live[id] = m
			}
		}
	}
	opt.BlockScans = h.scans
	if open != nil { // saved with carried-over scans (Options.GraceScans): room for them
		opt.GraceScans = max(opt.GraceScans, len(open.ts)-h.scans)
	}
	s := restoreStore(opt, live, last, segs, open)
	return s, errors.Join(errs...)
}

// restoreStore builds a Store holding the series of table (by ID, nil: free), whose newest
// points in closed segments are at last, the closed segments segs and the committed scans of
// the open segment open (nil: none).
func restoreStore(opt Options, table []*meta, last []int64, segs []*segment, open *segment) *Store {
	s := New(opt)
	w := &s.w
	w.kinds = make([]series.Kind, len(table))
	w.lastTS = make([]int64, len(table))
	mt := &metaTable{m: make([]atomic.Pointer[meta], max(64, len(table)))}
	for id := len(table) - 1; id >= 0; id-- { // so that the lowest free ID is reused first
		m := table[id]
		if m == nil {
			w.free = append(w.free, ID(id))
			continue
		}
		w.kinds[id] = m.kind
		w.lastTS[id] = last[id]
		mt.m[id].Store(m)
		s.keys.insert(m.key, ID(id))
		s.nseries.Add(1)
	}
	s.metas.Store(mt)
	if open != nil {
		s.stagingPoints.Store(int64(fillStaging(s.w.st, open, table)))
		s.w.j = len(open.ts)
		s.w.lastTS0 = open.last()
	} else if len(segs) > 0 {
		s.w.lastTS0 = segs[len(segs)-1].last()
	}
	s.view.Store(&view{segs: segs, open: s.w.st, gen: s.w.st.gen.Load()})
	if s.w.j == s.cap { // a full staging, saved between its last Commit and the close
		s.closeSegment()
	}
	return s
}

// fillStaging puts the points of g (a partial segment) of the series of table (by ID; nil
// entries are skipped), except those before the series' born time, into the empty staging st
// as committed scans, and returns how many it put. Writer only, before st is published.
func fillStaging(st *staging, g *segment, table []*meta) int {
	n := len(g.ts)
	copy(st.ts, g.ts)
	var d chunkenc.Decoded
	pts := 0
	// A chunk period at a time: staging.set is fast for the Adds of one period, as a scan
	// makes them, and slow when consecutive calls alternate between periods.
	for lo := 0; lo < n; lo += chunkScans {
		hi := min(n, lo+chunkScans)
		it := segIter{g: g}
		for id, m := range table {
			if m == nil {
				continue
			}
			blk := it.block(ID(id))
			if blk == nil || chunkenc.Decode(blk, n, &d) != nil {
				continue
			}
			for x := 0; x < d.N; x++ {
				if j := int(d.Idx[x]); j >= lo && j < hi && g.ts[j] >= m.born && st.set(ID(id), j, d.Val[x]) {
					pts++
				}
			}
		}
	}
	st.n.Store(int32(n))
	return pts
}

// readAll reads the file at path, which must be size bytes long (size < 0: any size up to
// maxDirFile); a different size is an error wrapping ErrCorrupt.
func readAll(path string, size int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, path)
	}
	if size >= 0 && fi.Size() != size {
		return nil, fmt.Errorf("%w: %s: %d bytes, HEAD says %d", ErrCorrupt, path, fi.Size(), size)
	}
	if fi.Size() > maxDirFile {
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrCorrupt, path, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: %s shrank while read", ErrCorrupt, path)
		}
		return nil, err
	}
	return b, nil
}

// damaged handles an error reading a file the HEAD names: a missing one is damage too; damaged
// files are moved aside, with the HEAD, while files that could not be read for another reason
// (permissions, I/O) stay in place.
func damaged(err error, unix int64, paths ...string) error {
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if !errors.Is(err, ErrCorrupt) {
		return err
	}
	return moveAside(err, unix, paths...)
}

// moveAside renames the damaged files (those that exist) to name.corrupt-<unix seconds> and
// returns err with what was done.
func moveAside(err error, unix int64, paths ...string) error {
	var moved []string
	for _, p := range paths {
		aside := p + ".corrupt-" + strconv.FormatInt(unix, 10)
		if rerr := os.Rename(p, aside); rerr == nil {
			moved = append(moved, aside)
		} else if !errors.Is(rerr, fs.ErrNotExist) {
			return fmt.Errorf("%w (and %s could not be moved aside: %v)", err, p, rerr)
		}
	}
	if len(moved) == 0 {
		return err
	}
	return fmt.Errorf("moved to %s: %w", strings.Join(moved, ", "), err)
}
