package history

import (
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// reportCPU reports CPU ns per unit since start.
func reportCPU(b *testing.B, start time.Duration, units int, name string) {
	b.ReportMetric(float64(cputime.Process()-start)/float64(units), name)
}
