package procmix

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

func TestRecordAndReadBack(t *testing.T) {
	proc := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(proc, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stat", "cpu  10 0 5 100 0 0 0 0 0 0\nctxt 42\nprocs_running 2\n")
	write("loadavg", "0.52 0.40 0.31 1/100 123\n")
	write("42/stat", "42 (my prog) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 4 0 100 1000000 250 18446744073709551615\n")
	r := NewRecorder(proc)
	if err := r.ScanOnce(time.UnixMilli(1000)); err != nil {
		t.Fatal(err)
	}
	write("stat", "cpu  12 0 5 101 0 0 0 0 0 0\nctxt 50\nprocs_running 1\n")
	if err := os.RemoveAll(filepath.Join(proc, "42")); err != nil {
		t.Fatal(err)
	}
	if err := r.ScanOnce(time.UnixMilli(3000)); err != nil {
		t.Fatal(err)
	}
	m := r.Mix()
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Series) != len(m.Series) || len(got.Scans) != 2 || got.Points() != m.Points() {
		t.Fatalf("read back %d series, %d scans, %d points; want %d, 2, %d", len(got.Series), len(got.Scans), got.Points(), len(m.Series), m.Points())
	}
	idx := map[string]int{}
	for i, s := range got.Series {
		idx[s.Key] = i
	}
	rss, ok := idx[series.Labels{"metric": "process.rss", "pid": "42", "process": "my prog"}.Key()]
	if !ok || got.Series[rss].Kind != series.Level {
		t.Fatalf("no process.rss level series in %v", got.Series)
	}
	if _, vals, ok := got.Column(rss); !ok[0] || ok[1] || vals[0] != 250 {
		t.Errorf("process.rss column = %v %v; want 250 then a gap", vals, ok)
	}
	ctxt := idx[series.Labels{"metric": "stat.ctxt"}.Key()]
	if _, vals, _ := got.Column(ctxt); vals[0] != 42 || vals[1] != 50 {
		t.Errorf("stat.ctxt = %v; want [42 50]", vals)
	}
}

func TestCommittedMixLoads(t *testing.T) {
	m, err := Load("../../history/testdata/procmix.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Scans) < 100 || len(m.Series) < 100 || m.Points() < 10000 {
		t.Errorf("mix has %d series, %d scans, %d points; want a real recording", len(m.Series), len(m.Scans), m.Points())
	}
}

func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("[{\"key\":\"{}\",\"kind\":\"counter\"}]\n{\"ts\":1,\"v\":[5]}\n{\"ts\":2,\"v\":[null]}\n"))
	zw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, s := range m.Scans {
			if len(s.V) != len(m.Series) {
				t.Fatalf("scan with %d values for %d series", len(s.V), len(m.Series))
			}
		}
	})
}
