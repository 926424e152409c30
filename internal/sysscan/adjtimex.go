package sysscan

// adjtimex(2): the kernel clock's synchronisation state (System).

import (
	"math"

	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// adjtimex(2) constants (linux/timex.h).
const (
	timeError = 5      // clock state returned when the clock is not synchronised
	staNano   = 0x2000 // status bit: offset and jitter in ns, else µs
	ppm16frac = 1e6 * 65536
)

// The timex series, in the order of timexValues' result.
const (
	txSync = iota
	txOffset
	txFreq
	txMaxerror
	txEsterror
	txStatus
	txConstant
	txTick
	txPPSFreq
	txJitter
	txShift
	txStabil
	txJitcnt
	txCalcnt
	txErrcnt
	txStbcnt
	txTAI
	txNum
)

var timexMetrics = [txNum]struct {
	name string
	kind series.Kind
}{
	txSync:     {"timex.sync_status", series.Level},
	txOffset:   {"timex.offset_s", series.Float},
	txFreq:     {"timex.frequency_adjustment_ratio", series.Float},
	txMaxerror: {"timex.maxerror_s", series.Float},
	txEsterror: {"timex.esterror_s", series.Float},
	txStatus:   {"timex.status", series.Level},
	txConstant: {"timex.constant", series.Level},
	txTick:     {"timex.tick_s", series.Float},
	txPPSFreq:  {"timex.pps_frequency_hz", series.Float},
	txJitter:   {"timex.pps_jitter_s", series.Float},
	txShift:    {"timex.pps_shift_s", series.Level},
	txStabil:   {"timex.pps_stability_hz", series.Float},
	txJitcnt:   {"timex.pps_jitter_count", series.Counter},
	txCalcnt:   {"timex.pps_calibration_count", series.Counter},
	txErrcnt:   {"timex.pps_error_count", series.Counter},
	txStbcnt:   {"timex.pps_stability_exceeded_count", series.Counter},
	txTAI:      {"timex.tai_offset_s", series.Level},
}

// timexValues converts what adjtimex(2) returned (its clock state and the struct) into the raw
// bits of the timex series, as node_exporter's timex collector computes them.
func timexValues(state int, t *unix.Timex) [txNum]uint64 {
	div := 1e6
	if t.Status&staNano != 0 {
		div = 1e9
	}
	var v [txNum]uint64
	sync := int64(1)
	if state == timeError {
		sync = 0
	}
	f := math.Float64bits
	cnt := func(n int64) uint64 { return uint64(max(n, 0)) }
	v[txSync] = uint64(sync)
	v[txOffset] = f(float64(t.Offset) / div)
	v[txFreq] = f(1 + float64(t.Freq)/ppm16frac)
	v[txMaxerror] = f(float64(t.Maxerror) / 1e6)
	v[txEsterror] = f(float64(t.Esterror) / 1e6)
	v[txStatus] = uint64(int64(t.Status))
	v[txConstant] = uint64(t.Constant)
	v[txTick] = f(float64(t.Tick) / 1e6)
	v[txPPSFreq] = f(float64(t.Ppsfreq) / ppm16frac)
	v[txJitter] = f(float64(t.Jitter) / div)
	v[txShift] = uint64(int64(t.Shift))
	v[txStabil] = f(float64(t.Stabil) / ppm16frac)
	v[txJitcnt] = cnt(t.Jitcnt)
	v[txCalcnt] = cnt(t.Calcnt)
	v[txErrcnt] = cnt(t.Errcnt)
	v[txStbcnt] = cnt(t.Stbcnt)
	v[txTAI] = uint64(int64(t.Tai))
	return v
}

// readTimex calls adjtimex(2) read-only (modes 0).
func readTimex(t *unix.Timex) (int, error) {
	*t = unix.Timex{}
	return unix.Adjtimex(t)
}

func (s *System) collectTimex(sink series.Sink) {
	state, err := readTimex(&s.tx)
	if err != nil {
		sink.Problem("adjtimex", err.Error())
		return
	}
	v := timexValues(state, &s.tx)
	for i := range v {
		r := s.timex[i]
		if r == nil {
			r = sink.Series(series.Labels{"metric": timexMetrics[i].name}, timexMetrics[i].kind)
			s.timex[i] = r
		}
		sink.Put(r, v[i])
	}
}

// timexState is what System keeps of adjtimex(2).
type timexState struct {
	timex [txNum]*series.Ref
	tx    unix.Timex
}
