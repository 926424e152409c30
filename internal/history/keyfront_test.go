package history

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// frontTable is a series table with the keys front coding meets: a process's series one after
// the other, free IDs, keys longer than frontMax, an empty key, keys that are prefixes and
// suffixes of their neighbours, and bytes that are not UTF-8.
func frontTable() []*meta {
	var t []*meta
	add := func(key string, kind series.Kind, born int64) { t = append(t, &meta{key: key, kind: kind, born: born}) }
	for pid := 1000; pid < 1040; pid++ {
		for _, m := range churnMetrics {
			add(`{"cgroup":"system.slice/runner-`+strconv.Itoa(pid%7)+`.service","metric":"`+m+`","pid":"`+strconv.Itoa(pid)+`","process":"cc1"}`, series.Counter, int64(pid)*2000)
		}
		if pid%5 == 0 {
			t = append(t, nil, nil)
		}
	}
	long := strings.Repeat("x", frontMax)
	add(long, series.Level, -5)
	add(long+"y", series.Level, 0) // one byte too long to share
	add(long[:frontMax-1]+"z", series.Float, 1)
	add("", series.Level, 2)
	add("ab", series.Level, 3)
	add("abab", series.Level, 4)
	add("b", series.Level, 5)
	add("\xff\x00\xfe", series.Float, 1<<62)
	add("\xff\x00\xfe\xff", series.Float, -1<<62)
	return t
}

var churnMetrics = []string{"process.cpu.user_ms", "process.cpu.system_ms", "process.memory.rss", "process.memory.vsize", "process.memory.swap", "process.threads", "process.io.read_bytes", "process.io.write_bytes"}

func sameTables(t *testing.T, got, want []*meta) {
	t.Helper()
	for len(want) > 0 && want[len(want)-1] == nil {
		want = want[:len(want)-1]
	}
	for len(got) > 0 && got[len(got)-1] == nil {
		got = got[:len(got)-1]
	}
	if len(got) != len(want) {
		t.Fatalf("table of %d IDs, want %d", len(got), len(want))
	}
	for id := range want {
		if (got[id] == nil) != (want[id] == nil) || got[id] != nil && *got[id] != *want[id] {
			t.Fatalf("ID %d: %+v, want %+v", id, got[id], want[id])
		}
	}
}

func TestFrontCodedTableRoundTrip(t *testing.T) {
	table := frontTable()
	got, err := parseBase(encodeBase(table))
	if err != nil {
		t.Fatal(err)
	}
	sameTables(t, got, table)

	// The log: from empty to table, then half of it freed and replaced.
	b, _ := appendLogBatch(logHeader(), nil, table)
	next := append([]*meta(nil), table...)
	for id := 0; id < len(next); id += 2 {
		if next[id] != nil {
			next[id] = &meta{key: next[id].key + "!", kind: next[id].kind, born: next[id].born + 1}
		} else {
			next[id] = &meta{key: "was free " + strconv.Itoa(id), kind: series.Counter}
		}
	}
	for id := 1; id < len(next); id += 4 {
		next[id] = nil
	}
	b, _ = appendLogBatch(b, table, next)
	got, err = applyLog(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	sameTables(t, got, next)
}

// TestFrontCodingShrinksProcessKeys: the reason for the format, a process's eight series take a
// fraction of their keys' bytes (not a timing, a size: the series table is written at every
// save under churn).
func TestFrontCodingShrinksProcessKeys(t *testing.T) {
	var table []*meta
	keyBytes := 0
	for _, m := range frontTable() {
		if m != nil && strings.HasPrefix(m.key, `{"cgroup"`) {
			table = append(table, m)
			keyBytes += len(m.key)
		}
	}
	b, _ := appendLogBatch(nil, nil, table)
	if base := encodeBase(table); len(base) > keyBytes/4 || len(b) > keyBytes/4 {
		t.Errorf("%d series, %d key bytes: base %d bytes, log batch %d; want at most a quarter", len(table), keyBytes, len(base), len(b))
	}
}

func TestFrontCodedRecordRejected(t *testing.T) {
	rec := func(prev string, kind byte, p, s uint64, mid string) error {
		b := append([]byte{kind}, 0)
		b = binary.AppendUvarint(b, p)
		b = binary.AppendUvarint(b, s)
		b = binary.AppendUvarint(b, uint64(len(mid)))
		b = append(b, mid...)
		r := &snapReader{b: b}
		m := readFrontRec(r, prev)
		if r.err == nil && r.p != len(b) {
			t.Fatalf("read %d of %d bytes", r.p, len(b))
		}
		if (m == nil) != (r.err != nil) {
			t.Fatalf("meta %v with error %v", m, r.err)
		}
		return r.err
	}
	long := strings.Repeat("a", frontMax)
	for _, c := range []struct {
		name    string
		prev    string
		p, s    uint64
		mid     string
		kind    byte
		wantErr bool
	}{
		{"whole key", "abc", 0, 0, "xyz", byte(series.Counter), false},
		{"all shared", "abc", 2, 1, "", byte(series.Counter), false},
		{"prefix beyond the previous key", "abc", 4, 0, "", byte(series.Counter), true},
		{"prefix and suffix overlap", "abc", 2, 2, "", byte(series.Counter), true},
		{"huge suffix", "abc", 1, 1<<64 - 1, "", byte(series.Counter), true},
		{"huge prefix", "abc", 1<<64 - 1, 2, "", byte(series.Counter), true},
		{"shared key longer than frontMax", long, frontMax, 0, "b", byte(series.Counter), true},
		{"long key written whole", long, 0, 0, long + "b", byte(series.Counter), false},
		{"bad kind", "abc", 1, 0, "", 77, true},
	} {
		err := rec(c.prev, c.kind, c.p, c.s, c.mid)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: error %v, want error %v", c.name, err, c.wantErr)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error %v does not wrap ErrCorrupt", c.name, err)
		}
	}

	// Many records each taking a whole shared key from a few bytes: bounded by the input.
	b := binary.AppendUvarint(nil, 0)
	b = append(b, byte(series.Counter), 0, 0, 0)
	b = binary.AppendUvarint(b, frontMax)
	b = append(b, long...)
	n := 100_000
	for i := 1; i < n; i++ {
		b = append(b, 0, byte(series.Counter), 0)
		b = binary.AppendUvarint(b, frontMax-1)
		b = append(b, 0, 1, 'a')
	}
	body := append([]byte(baseMagic), keysVersion)
	body = binary.AppendUvarint(body, uint64(n))
	body = append(body, b...)
	if _, err := parseBase(withCRC(body)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("%d records sharing %d bytes each from 6 bytes: error %v, want ErrCorrupt", n, frontMax-1, err)
	}
}

// encodeBaseV2 and logV2 write a series table as version 2 did (whole keys).
func encodeBaseV2(table []*meta) []byte {
	b := append([]byte(baseMagic), 2)
	n := 0
	for _, m := range table {
		if m != nil {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	next := 0
	for id, m := range table {
		if m != nil {
			b = binary.AppendUvarint(b, uint64(id-next))
			next = id + 1
			b = appendKeyRecV2(b, m)
		}
	}
	return appendCRC(b, b)
}

func appendKeyRecV2(b []byte, m *meta) []byte {
	b = append(b, byte(m.kind))
	b = binary.AppendVarint(b, m.born)
	b = binary.AppendUvarint(b, uint64(len(m.key)))
	return append(b, m.key...)
}

func logV2(batches ...[]*meta) []byte {
	b := append([]byte(logMagic), 2)
	var old []*meta
	for _, cur := range batches {
		var p []byte
		for id := range max(len(old), len(cur)) {
			var o, c *meta
			if id < len(old) {
				o = old[id]
			}
			if id < len(cur) {
				c = cur[id]
			}
			switch {
			case o == c:
			case c == nil:
				p = binary.AppendUvarint(append(p, recDel), uint64(id))
			default:
				p = appendKeyRecV2(binary.AppendUvarint(append(p, recSet), uint64(id)), c)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = appendCRC(append(b, p...), p)
		old = cur
	}
	return b
}

func TestVersion2TableReads(t *testing.T) {
	table := frontTable()
	got, err := parseBase(encodeBaseV2(table))
	if err != nil {
		t.Fatal(err)
	}
	sameTables(t, got, table)
	next := append([]*meta(nil), table[:len(table)/2]...)
	next[3] = nil
	next = append(next, &meta{key: "added", kind: series.Level})
	got, err = applyLog(nil, logV2(table, next))
	if err != nil {
		t.Fatal(err)
	}
	sameTables(t, got, next)
	// A version 2 log holds no front-coded record, and a version 3 log no whole one.
	b, _ := appendLogBatch(append([]byte(logMagic), 2), nil, table)
	if _, err := applyLog(nil, b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("front-coded records in a version 2 log: error %v", err)
	}
	b = logV2(table)
	b[len(logMagic)] = keysVersion
	if _, err := applyLog(nil, b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("whole records in a version 3 log: error %v", err)
	}
}

// TestLoadDirVersion2Table: a snapshot directory whose series table an earlier agent wrote
// (version 2) loads with every point, and the next save rewrites the table in the current
// format (never appending front-coded batches to a version 2 log); that loads again the same.
func TestLoadDirVersion2Table(t *testing.T) {
	const ts0 = 1_800_000_000_000
	s := sampleStore(ts0)
	dir := t.TempDir()
	sv := NewSaver(dir, s)
	mustSave(t, sv)
	// Rewrite the table as version 2, a base and a log of one batch, and HEAD to name them.
	hb, err := os.ReadFile(filepath.Join(dir, headName))
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHead(hb, nil)
	if err != nil {
		t.Fatal(err)
	}
	table := append([]*meta(nil), sv.keys...)
	half := append([]*meta(nil), table[:len(table)/2]...)
	base, log := encodeBaseV2(half), logV2(half, table)
	if err := os.WriteFile(filepath.Join(dir, keysBaseName(h.gen)), base, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keysLogName(h.gen)), log, 0o640); err != nil {
		t.Fatal(err)
	}
	h.baseSize, h.baseCRC, h.logLen = int64(len(base)), binary.LittleEndian.Uint32(base[len(base)-4:]), int64(len(log))
	if err := os.WriteFile(filepath.Join(dir, headName), joinParts(encodeHead(h)), 0o640); err != nil {
		t.Fatal(err)
	}

	now := Options{Now: nowAt(ts0 + 3600_000)}
	s2, sv2, err := LoadDir(dir, "", now)
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, s, s2)
	if st := mustSave(t, sv2); !st.KeysRewritten {
		t.Errorf("first save after loading a version 2 table %+v; want it rewritten", st)
	}
	b, err := os.ReadFile(filepath.Join(dir, keysLogName(sv2.gen)))
	if err != nil {
		t.Fatal(err)
	}
	if b[len(logMagic)] != keysVersion {
		t.Errorf("log version %d after the rewrite", b[len(logMagic)])
	}
	// The following saves append to the new log.
	id, _ := s2.Series(`{"metric":"after"}`, series.Level)
	s2.Begin(ts0 + 3600_000)
	s2.Add(id, 1)
	s2.Commit()
	if st := mustSave(t, sv2); st.KeysRewritten {
		t.Errorf("second save %+v; want a log batch", st)
	}
	s3, _, err := LoadDir(dir, "", now)
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, s2, s3)
}
