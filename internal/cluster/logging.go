package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Gossip log budget: memberlist logs one line for every packet it cannot use (a junk or
// wrongly keyed datagram is an ERROR line), and the transport's HTTP server one for every
// failed TLS handshake, so whoever can send packets to the node could otherwise write its log
// at line rate (23 893 lines in 5 s were measured). At most logBurst lines pass at once and
// logRate a second after that; what is held back is counted and reported in one line per
// logSummaryEvery.
const (
	logRate         = 5
	logBurst        = 5
	logSummaryEvery = 10 * time.Second
)

// logLimiter is a token bucket over the lines of one node's gossip logs. It is safe for
// concurrent use.
type logLimiter struct {
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
	summary    *time.Timer // pending summary of the suppressed lines; nil when none
	stopped    bool
}

func newLogLimiter(l *slog.Logger) *logLimiter {
	return &logLimiter{log: l, now: time.Now, tokens: logBurst}
}

// allow reports whether one more line may be logged now, counting it as suppressed if not.
func (l *logLimiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logRate)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.suppressed++
	if l.summary == nil && !l.stopped {
		l.summary = time.AfterFunc(logSummaryEvery, l.report)
	}
	return false
}

// report logs how many lines were held back since the last report.
func (l *logLimiter) report() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed, l.summary = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(strconv.Itoa(n)+" gossip log lines suppressed in the last "+logSummaryEvery.String(),
			"component", "memberlist", "suppressed", n)
	}
}

// stop reports what is still held back and schedules no more reports.
func (l *logLimiter) stop() {
	l.mu.Lock()
	l.stopped = true
	t := l.summary
	l.mu.Unlock()
	if t != nil && t.Stop() {
		l.report()
	}
}

// slogWriter turns memberlist's "[LEVEL] memberlist: message" log lines into slog records,
// within the node's gossip log budget (logLimiter). It also reports this node's own suspicions
// to onSuspect, whether the line is logged or not: memberlist has no public way to tell that a
// node is suspect (its Node.State field is never set; the state lives in a private field), but
// it logs "Suspect NAME has failed, no acks received" when one of this node's probes fails.
// TestSuspectReported guards the message's format.
type slogWriter struct {
	log       *slog.Logger
	lim       *logLimiter
	level     slog.Level // of a line without a level tag
	component string
	onSuspect func(name string)
}

// newMemberlistLogger returns the *log.Logger memberlist writes to; lim may be shared with
// other loggers of the node (nil: a budget of its own).
func newMemberlistLogger(l *slog.Logger, lim *logLimiter, onSuspect func(string)) *log.Logger {
	if lim == nil {
		lim = newLogLimiter(l)
	}
	return log.New(slogWriter{log: l, lim: lim, level: slog.LevelInfo, component: "memberlist", onSuspect: onSuspect}, "", 0)
}

// newServerErrorLog returns the ErrorLog of the transport's stream listener: its lines (a
// failed TLS handshake, a malformed request) are debug records within the budget lim.
func newServerErrorLog(l *slog.Logger, lim *logLimiter) *log.Logger {
	return log.New(slogWriter{log: l, lim: lim, level: slog.LevelDebug, component: "gossip-listener"}, "", 0)
}

const (
	suspectPrefix = "Suspect "
	suspectSuffix = " has failed, no acks received"
)

func (w slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	level := w.level
	for _, lv := range []struct {
		tag   string
		level slog.Level
	}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}} {
		if bytes.HasPrefix(line, []byte(lv.tag)) {
			level = lv.level
			line = bytes.TrimSpace(line[len(lv.tag):])
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	if w.onSuspect != nil && bytes.HasPrefix(line, []byte(suspectPrefix)) && bytes.HasSuffix(line, []byte(suspectSuffix)) {
		w.onSuspect(string(line[len(suspectPrefix) : len(line)-len(suspectSuffix)]))
	}
	if w.log.Enabled(context.Background(), level) && w.lim.allow() {
		w.log.Log(context.Background(), level, string(line), "component", w.component)
	}
	return len(p), nil
}
