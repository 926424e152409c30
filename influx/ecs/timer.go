package ecs

import (
	"log/slog"
	"time"
)

// TimeResolution is the unit a Timer measures in.
type TimeResolution int

// The resolutions: field execution_time_ms or execution_time_ns, an integer.
const (
	Millisecond TimeResolution = iota
	Nanosecond
)

// TimeUnit, Milliseconds and Nanoseconds are the names an earlier ECS gave to
// TimeResolution, Millisecond and Nanosecond.
type TimeUnit = TimeResolution

// Earlier names of Millisecond and Nanosecond.
const (
	Milliseconds = Millisecond
	Nanoseconds  = Nanosecond
)

// Timer is meant for a defer statement; it measures the function's run time into metric:
//
//	defer Timer(&metric, Millisecond)()
//
// sets field execution_time_ms (or, for Nanosecond, execution_time_ns) when the function
// returns. An unknown resolution sets nothing and is logged.
func Timer(metric *Metric, unit TimeResolution) func() {
	return timer(metric, unit, false, false)
}

// TimerSendSingle is Timer followed by Send(metric).
func TimerSendSingle(metric *Metric, unit TimeResolution) func() {
	return timer(metric, unit, true, false)
}

// TimerSendHist is Timer followed by SendHistogrammable(metric).
func TimerSendHist(metric *Metric, unit TimeResolution) func() {
	return timer(metric, unit, true, true)
}

// TimerSend is an earlier ECS's name of TimerSendHist.
func TimerSend(metric *Metric, unit TimeResolution) func() {
	return TimerSendHist(metric, unit)
}

// TimerMS is an earlier ECS's Timer(metric, Millisecond).
func TimerMS(metric *Metric) func() { return Timer(metric, Millisecond) }

// TimerNS is an earlier ECS's Timer(metric, Nanosecond).
func TimerNS(metric *Metric) func() { return Timer(metric, Nanosecond) }

func timer(metric *Metric, unit TimeResolution, send, hist bool) func() {
	start := time.Now()
	return func() {
		dur := time.Since(start)
		switch unit {
		case Millisecond:
			metric.SetFieldInt64("execution_time_ms", dur.Milliseconds())
		case Nanosecond:
			metric.SetFieldInt64("execution_time_ns", dur.Nanoseconds())
		default:
			slog.Warn("ecs monitoring: unknown time resolution; the timer sets nothing", "resolution", int(unit))
		}
		if send {
			if hist {
				SendHistogrammable(metric)
			} else {
				Send(metric)
			}
		}
	}
}
