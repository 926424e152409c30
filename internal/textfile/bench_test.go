package textfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// benchDir writes files *.prom of n series each, as a host with a few cron jobs has.
func benchDir(b *testing.B, files, n int) string {
	d := b.TempDir()
	os.Chmod(filepath.Dir(d), 0o755)
	os.Chmod(d, 0o755)
	for f := 0; f < files; f++ {
		var sb strings.Builder
		fmt.Fprintf(&sb, "# HELP job%d_value A value.\n# TYPE job%d_value gauge\n", f, f)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&sb, "job%d_value{item=\"item%d\",host=\"h\"} %d.5\n", f, i, i)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("job%d.prom", f)), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// BenchmarkCollectUnchanged: a scan of 10 files of 100 series that did not change (stat only).
func BenchmarkCollectUnchanged(b *testing.B) {
	d := benchDir(b, 10, 100)
	c := New(d, later(Options{}))
	var sink series.Discard
	c.Collect(context.Background(), &sink)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c.Collect(context.Background(), &sink)
	}
}

// BenchmarkCollectChanged: a scan of 10 files of 100 series, each rewritten since the last
// (read and parsed again).
func BenchmarkCollectChanged(b *testing.B) {
	d := benchDir(b, 10, 100)
	c := New(d, later(Options{}))
	var sink series.Discard
	names, _ := filepath.Glob(filepath.Join(d, "*.prom"))
	t0 := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		for _, n := range names {
			os.Chtimes(n, t0, t0.Add(-time.Hour+time.Duration(i)*time.Millisecond))
		}
		b.StartTimer()
		c.Collect(context.Background(), &sink)
	}
}
