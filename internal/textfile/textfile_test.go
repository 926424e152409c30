package textfile

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// dir returns a root-owned directory closed to others, as the textfile directory of a
// node_exporter install is (OpenTrustedDir refuses a squatted one).
func dir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("must run as root, like the agent")
	}
	d := t.TempDir()
	os.Chmod(filepath.Dir(d), 0o755)
	os.Chmod(d, 0o755)
	return d
}

// renameInto writes content as cron jobs are told to: to a temporary name, then renamed into
// place.
func renameInto(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func collect(t *testing.T, c *Collector) *series.Recorder {
	t.Helper()
	rec := series.NewRecorder()
	if err := c.Collect(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// value returns the value of the series with labels l, and whether it was written.
func value(rec *series.Recorder, l series.Labels) (float64, bool) {
	bits, ok := rec.Values[l.Key()]
	if !ok {
		return 0, false
	}
	if l["metric"] == "textfile.scrape_error" {
		return float64(int64(bits)), true
	}
	return math.Float64frombits(bits), true
}

func scrapeError(t *testing.T, rec *series.Recorder) float64 {
	t.Helper()
	v, ok := value(rec, series.Labels{"metric": "textfile.scrape_error"})
	if !ok {
		t.Fatal("no textfile.scrape_error")
	}
	return v
}

func problems(rec *series.Recorder, path string) string {
	return strings.Join(rec.Problems[path], "; ")
}

const backup = `# HELP backup_age_seconds Age of the last backup.
# TYPE backup_age_seconds gauge
backup_age_seconds{job="db"} 3600
backup_age_seconds{job="home"} 7200
# TYPE backups_total counter
backups_total 42
# TYPE rpc_duration_seconds histogram
rpc_duration_seconds_bucket{le="0.5"} 3
rpc_duration_seconds_bucket{le="+Inf"} 5
rpc_duration_seconds_sum 2.5
rpc_duration_seconds_count 5
`

func TestRenamedIntoPlace(t *testing.T) {
	d := dir(t)
	path := filepath.Join(d, "backup.prom")
	renameInto(t, path, backup)
	os.WriteFile(filepath.Join(d, "notes.txt"), []byte("not a .prom file"), 0o644)
	c := New(d, later(Options{}))
	rec := collect(t, c)
	if e := scrapeError(t, rec); e != 0 {
		t.Fatalf("scrape_error %v: %v", e, rec.Problems)
	}
	for _, w := range []struct {
		l series.Labels
		v float64
	}{
		{series.Labels{"metric": "backup_age_seconds", "job": "db", "textfile": path}, 3600},
		{series.Labels{"metric": "backup_age_seconds", "job": "home", "textfile": path}, 7200},
		{series.Labels{"metric": "backups_total", "textfile": path}, 42},
		{series.Labels{"metric": "rpc_duration_seconds_bucket", "le": "+Inf", "textfile": path}, 5},
		{series.Labels{"metric": "rpc_duration_seconds_sum", "textfile": path}, 2.5},
	} {
		if v, ok := value(rec, w.l); !ok || v != w.v {
			t.Errorf("%v: %v %v, want %v", w.l, v, ok, w.v)
		}
	}
	st, _ := os.Stat(path)
	if v, ok := value(rec, series.Labels{"metric": "textfile.mtime_s", "file": path}); !ok || v != float64(st.ModTime().Unix()) {
		t.Errorf("mtime %v %v, want %v", v, ok, st.ModTime())
	}
	if typ, _ := c.Type("backups_total"); typ != Counter {
		t.Errorf("backups_total typed %v", typ)
	}
	if typ, _ := c.Type("backup_age_seconds"); typ != Gauge {
		t.Errorf("backup_age_seconds typed %v", typ)
	}
	if len(rec.Values) != 9 { // 7 samples (2 buckets), mtime, scrape_error
		t.Errorf("%d series: %v", len(rec.Values), rec.Values)
	}
	// Unchanged: not read again, same values. A new version renamed into place is.
	n := c.Parses()
	rec = collect(t, c)
	if c.Parses() != n {
		t.Errorf("an unchanged file was parsed again")
	}
	if v, ok := value(rec, series.Labels{"metric": "backups_total", "textfile": path}); !ok || v != 42 {
		t.Errorf("unchanged file: backups_total %v %v", v, ok)
	}
	renameInto(t, path, "# TYPE backups_total counter\nbackups_total 43\n")
	rec = collect(t, c)
	if v, ok := value(rec, series.Labels{"metric": "backups_total", "textfile": path}); !ok || v != 43 {
		t.Errorf("after rename: backups_total %v %v", v, ok)
	}
	if _, ok := value(rec, series.Labels{"metric": "backup_age_seconds", "job": "db", "textfile": path}); ok {
		t.Errorf("a series gone from the file is still written")
	}
	// Removed: none of its series, no mtime, and nothing kept of it.
	os.Remove(path)
	rec = collect(t, c)
	if len(rec.Values) != 1 || scrapeError(t, rec) != 0 || len(c.files) != 0 {
		t.Errorf("after removal: %v, %d files kept", rec.Values, len(c.files))
	}
}

// A file written in place by a writer that stalled mid-line longer than Options.Settle (the
// clock of later), caught half-written, is refused whole: none of its series, scrape_error 1;
// complete, it is taken.
func TestWrittenInPlace(t *testing.T) {
	d := dir(t)
	path := filepath.Join(d, "inplace.prom")
	full := "job_a_ok 1\njob_b_ok 1\njob_c_ok 1\n"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(full[:15]) // "job_a_ok 1\njob"
	c := New(d, later(Options{}))
	rec := collect(t, c)
	if scrapeError(t, rec) != 1 || !strings.Contains(problems(rec, path), "line 2") {
		t.Errorf("half-written: scrape_error %v, problems %q", scrapeError(t, rec), problems(rec, path))
	}
	if _, ok := value(rec, series.Labels{"metric": "job_a_ok", "textfile": path}); ok {
		t.Errorf("a half-written file was half read")
	}
	f.WriteString(full[15:])
	rec = collect(t, c)
	if scrapeError(t, rec) != 0 {
		t.Errorf("complete: scrape_error 1: %v", rec.Problems)
	}
	for _, m := range []string{"job_a_ok", "job_b_ok", "job_c_ok"} {
		if v, ok := value(rec, series.Labels{"metric": m, "textfile": path}); !ok || v != 1 {
			t.Errorf("%s: %v %v", m, v, ok)
		}
	}
}

// Malformed files are refused whole with scrape_error 1; the other files are kept.
func TestMalformedFilesRefusedOthersKept(t *testing.T) {
	d := dir(t)
	good := filepath.Join(d, "good.prom")
	renameInto(t, good, "good_metric 1\n")
	bad := map[string]string{
		"badvalue.prom":   "ok_before 1\nbad_metric{x=\"y\"} notanumber\n",
		"badlabel.prom":   "ok_before 1\nbad_metric{x=\"unterminated} 1\n",
		"twotypes.prom":   "# TYPE dup gauge\ndup 1\n# TYPE dup counter\ndup 2\n",
		"twice.prom":      "same{a=\"1\"} 1\nsame{a=\"1\"} 2\n",
		"timestamp.prom":  "with_ts 1 1700000000000\n",
		"reserved.prom":   "x{metric=\"cpu\"} 1\n",
		"reserved2.prom":  "x{textfile=\"/etc/passwd\"} 1\n",
		"push.prom":       "x{source=\"push\"} 1\n",
		"utf8name.prom":   "{\"dotted.name\"} 1\n",
		"secretline.prom": "root:x:0:0:root:/root:/bin/bash\n",
	}
	for name, content := range bad {
		renameInto(t, filepath.Join(d, name), content)
	}
	rec := collect(t, New(d, later(Options{})))
	if scrapeError(t, rec) != 1 {
		t.Errorf("scrape_error 0")
	}
	if v, ok := value(rec, series.Labels{"metric": "good_metric", "textfile": good}); !ok || v != 1 {
		t.Errorf("good file not kept: %v %v", v, ok)
	}
	for name := range bad {
		path := filepath.Join(d, name)
		p := problems(rec, path)
		if p == "" {
			t.Errorf("%s: no problem", name)
		}
		if strings.Contains(p, "root:") || strings.Contains(p, "notanumber") || strings.Contains(p, "passwd") {
			t.Errorf("%s: the problem quotes the file: %q", name, p)
		}
		for k := range rec.Values {
			if strings.Contains(k, path) {
				t.Errorf("%s: series %s taken", name, k)
			}
		}
	}
}

// The same series in two files: the later file (by name) is refused; a family split over
// files with distinct series is fine; a family typed otherwise in a later file is refused.
func TestDuplicateFamiliesAcrossFiles(t *testing.T) {
	d := dir(t)
	renameInto(t, filepath.Join(d, "a.prom"), "# TYPE job_ok gauge\njob_ok{job=\"a\"} 1\n")
	renameInto(t, filepath.Join(d, "b.prom"), "# TYPE job_ok gauge\njob_ok{job=\"b\"} 1\n")
	renameInto(t, filepath.Join(d, "c.prom"), "job_ok{job=\"a\"} 0\n")
	renameInto(t, filepath.Join(d, "d.prom"), "# TYPE job_ok counter\njob_ok{job=\"d\"} 1\n")
	rec := collect(t, New(d, later(Options{})))
	if scrapeError(t, rec) != 1 {
		t.Errorf("scrape_error 0")
	}
	for f, want := range map[string]bool{"a.prom": true, "b.prom": true, "c.prom": false, "d.prom": false} {
		path := filepath.Join(d, f)
		got := false
		for k := range rec.Values {
			got = got || (strings.Contains(k, path) && strings.Contains(k, "job_ok"))
		}
		if got != want {
			t.Errorf("%s taken: %v, want %v (problems %q)", f, got, want, problems(rec, path))
		}
	}
	if !strings.Contains(problems(rec, filepath.Join(d, "c.prom")), "earlier file") {
		t.Errorf("c.prom: %q", problems(rec, filepath.Join(d, "c.prom")))
	}
}

// A 10 MB file is refused by its size before it is read, with a clear problem; the others
// are kept and the collector's buffer stays small.
func TestLargeFileRefused(t *testing.T) {
	d := dir(t)
	big := filepath.Join(d, "big.prom")
	var b strings.Builder
	for b.Len() < 10<<20 {
		b.WriteString("big_series{n=\"")
		b.WriteString(strings.Repeat("x", 60))
		b.WriteString("\"} 1\n")
	}
	renameInto(t, big, b.String())
	renameInto(t, filepath.Join(d, "small.prom"), "small 1\n")
	c := New(d, later(Options{}))
	rec := collect(t, c)
	if scrapeError(t, rec) != 1 || !strings.Contains(problems(rec, big), "exceeds the limit of 1048576 bytes") {
		t.Errorf("big file: scrape_error %v, problem %q", scrapeError(t, rec), problems(rec, big))
	}
	if _, ok := value(rec, series.Labels{"metric": "small", "textfile": filepath.Join(d, "small.prom")}); !ok {
		t.Errorf("small file not kept")
	}
	if cap(c.buf) > DefaultMaxFileSize {
		t.Errorf("buffer of %d bytes", cap(c.buf))
	}
	if c.Parses() != 1 {
		t.Errorf("%d parses, want 1 (the small file)", c.Parses())
	}
	// Many files under the per-file cap, together over the total cap: the ones beyond it are
	// refused.
	d2 := dir(t)
	chunk := strings.Repeat("m{n=\"1\"} 1\n", 1) + strings.Repeat("#"+strings.Repeat(" ", 100)+"\n", 9000)
	for i := 0; i < 4; i++ {
		renameInto(t, filepath.Join(d2, string(rune('a'+i))+".prom"), chunk)
	}
	rec = collect(t, New(d2, later(Options{MaxTotalSize: 2 << 20})))
	if !strings.Contains(problems(rec, filepath.Join(d2, "c.prom")), "together are larger") {
		t.Errorf("total cap: %v", rec.Problems)
	}
}

// Symlinks are refused, in the directory or out of it; the target is never read.
func TestSymlinksRefused(t *testing.T) {
	d := dir(t)
	outside := filepath.Join(t.TempDir(), "secret.prom")
	os.WriteFile(outside, []byte("secret_value 42\n"), 0o600)
	os.Symlink(outside, filepath.Join(d, "out.prom"))
	renameInto(t, filepath.Join(d, "real.prom"), "real_value 1\n")
	os.Symlink("real.prom", filepath.Join(d, "in.prom"))
	rec := collect(t, New(d, later(Options{})))
	if scrapeError(t, rec) != 1 {
		t.Errorf("scrape_error 0")
	}
	for _, n := range []string{"out.prom", "in.prom"} {
		if p := problems(rec, filepath.Join(d, n)); !strings.Contains(p, "refused") {
			t.Errorf("%s: %q", n, p)
		}
	}
	for k := range rec.Values {
		if strings.Contains(k, "secret_value") || strings.Contains(k, "in.prom") {
			t.Errorf("taken through a symlink: %s", k)
		}
	}
}

// Files of users other than root and the directory's owner, and files anyone may write to,
// are refused without being read.
func TestOtherUsersFilesRefused(t *testing.T) {
	d := dir(t)
	other := filepath.Join(d, "other.prom")
	renameInto(t, other, "other_value 1\n")
	os.Chown(other, 65534, 65534)
	ww := filepath.Join(d, "worldwritable.prom")
	renameInto(t, ww, "ww_value 1\n")
	os.Chmod(ww, 0o666)
	renameInto(t, filepath.Join(d, "root.prom"), "root_value 1\n")
	rec := collect(t, New(d, later(Options{})))
	if scrapeError(t, rec) != 1 {
		t.Errorf("scrape_error 0")
	}
	if p := problems(rec, other); !strings.Contains(p, "uid 65534") {
		t.Errorf("other user's file: %q", p)
	}
	if p := problems(rec, ww); !strings.Contains(p, "every user may write") {
		t.Errorf("world-writable file: %q", p)
	}
	if _, ok := value(rec, series.Labels{"metric": "root_value", "textfile": filepath.Join(d, "root.prom")}); !ok {
		t.Errorf("root's file not kept")
	}
	for k := range rec.Values {
		if strings.Contains(k, "other_value") || strings.Contains(k, "ww_value") {
			t.Errorf("taken: %s", k)
		}
	}
	// A directory owned by a user: that user's files are read.
	ud := dir(t)
	os.Chown(ud, 65534, 65534)
	f := filepath.Join(ud, "user.prom")
	renameInto(t, f, "user_value 1\n")
	os.Chown(f, 65534, 65534)
	rec = collect(t, New(ud, later(Options{})))
	if _, ok := value(rec, series.Labels{"metric": "user_value", "textfile": f}); !ok || scrapeError(t, rec) != 0 {
		t.Errorf("the directory owner's file: %v", rec.Problems)
	}
}

// A missing directory is a scrape error, as in node_exporter.
func TestMissingDirectory(t *testing.T) {
	d := filepath.Join(dir(t), "nope")
	rec := collect(t, New(d, later(Options{})))
	if scrapeError(t, rec) != 1 || rec.Problems[d] == nil {
		t.Errorf("missing directory: %v", rec.Problems)
	}
}

// later sets opt's clock a minute ahead: every file is older than Options.Settle, so a file
// is taken at the first scan that sees it.
func later(opt Options) Options {
	opt.Now = func() time.Time { return time.Now().Add(time.Minute) }
	return opt
}

// A file written in place, caught between two writes that end on line boundaries (which would
// parse), is not taken while it was modified less than Options.Settle ago and differs from
// what the previous scan saw: no series, no problem, the previous version's values standing;
// once the same at two scans, it is taken whole.
func TestInPlaceWriterGivenTimeToSettle(t *testing.T) {
	d := dir(t)
	path := filepath.Join(d, "job.prom")
	var now time.Time
	justAfterWrite := func() {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		now = st.ModTime().Add(10 * time.Millisecond)
	}
	c := New(d, Options{Now: func() time.Time { return now }})
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("part_a 1\n")
	justAfterWrite()
	rec := collect(t, c)
	if len(rec.Values) != 1 || scrapeError(t, rec) != 0 || len(rec.Problems) != 0 {
		t.Errorf("first half, just written: %v %v", rec.Values, rec.Problems)
	}
	f.WriteString("part_b 2\n")
	justAfterWrite()
	rec = collect(t, c)
	if len(rec.Values) != 1 {
		t.Errorf("second half, just written: %v", rec.Values)
	}
	rec = collect(t, c) // the same as at the previous scan: done
	for m, v := range map[string]float64{"part_a": 1, "part_b": 2} {
		if got, ok := value(rec, series.Labels{"metric": m, "textfile": path}); !ok || got != v {
			t.Errorf("settled: %s %v %v", m, got, ok)
		}
	}
	// Rewritten in place: the previous version stands until the new one settles.
	f.Truncate(0)
	f.WriteAt([]byte("part_a 5\n"), 0)
	justAfterWrite()
	rec = collect(t, c)
	if got, _ := value(rec, series.Labels{"metric": "part_b", "textfile": path}); got != 2 {
		t.Errorf("while the rewrite settles, part_b %v, want the previous 2", got)
	}
	now = now.Add(time.Second)
	rec = collect(t, c)
	if got, _ := value(rec, series.Labels{"metric": "part_a", "textfile": path}); got != 5 {
		t.Errorf("after the rewrite settled, part_a %v", got)
	}
	if _, ok := value(rec, series.Labels{"metric": "part_b", "textfile": path}); ok {
		t.Errorf("part_b still written after the rewrite")
	}
}
