// Package logbudget bounds how many lines a source of log lines that outsiders can trigger (bad
// packets, failed TLS handshakes, refused requests) may write: whoever can send packets to the
// agent could otherwise write its log at line rate (23 893 lines in 5 s were measured from junk
// gossip packets). A Limiter is a token bucket: Burst lines at once, Rate a second after that;
// what is held back is counted and reported in one line per SummaryEvery.
package logbudget

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// The budget of one Limiter.
const (
	Rate         = 5
	Burst        = 5
	SummaryEvery = 10 * time.Second
)

// Limiter is a token bucket over the lines of one source. It is safe for concurrent use.
type Limiter struct {
	log  *slog.Logger
	what string
	now  func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
	summary    *time.Timer // pending summary of the suppressed lines; nil when none
	stopped    bool
}

// New returns a Limiter whose summaries go to l, naming the lines what ("gossip log lines").
func New(l *slog.Logger, what string) *Limiter {
	return &Limiter{log: l, what: what, now: time.Now, tokens: Burst}
}

// Allow reports whether one more line may be logged now, counting it as suppressed if not.
func (l *Limiter) Allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(Burst, l.tokens+now.Sub(l.last).Seconds()*Rate)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.suppressed++
	if l.summary == nil && !l.stopped {
		l.summary = time.AfterFunc(SummaryEvery, l.report)
	}
	return false
}

// report logs how many lines were held back since the last report.
func (l *Limiter) report() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed, l.summary = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(strconv.Itoa(n)+" "+l.what+" suppressed in the last "+SummaryEvery.String(), "suppressed", n)
	}
}

// Stop reports what is still held back and schedules no more reports.
func (l *Limiter) Stop() {
	l.mu.Lock()
	l.stopped = true
	t := l.summary
	l.mu.Unlock()
	if t != nil && t.Stop() {
		l.report()
	}
}

// ErrorLog returns a *log.Logger (for an http.Server's ErrorLog) whose lines become records of
// level on l, within the budget lim.
func ErrorLog(l *slog.Logger, lim *Limiter, level slog.Level) *log.Logger {
	return log.New(writer{log: l, lim: lim, level: level}, "", 0)
}

type writer struct {
	log   *slog.Logger
	lim   *Limiter
	level slog.Level
}

func (w writer) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		if line := sc.Text(); line != "" && w.lim.Allow() {
			w.log.Log(nil, w.level, line)
		}
	}
	return len(p), nil
}

var _ io.Writer = writer{}
