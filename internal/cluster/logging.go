package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"

	"github.com/cantal-go/cantal/internal/logbudget"
)

// slogWriter turns memberlist's "[LEVEL] memberlist: message" log lines into slog records,
// within the node's gossip log budget (logLimiter). It also reports this node's own suspicions
// to onSuspect, whether the line is logged or not: memberlist has no public way to tell that a
// node is suspect (its Node.State field is never set; the state lives in a private field), but
// it logs "Suspect NAME has failed, no acks received" when one of this node's probes fails.
// TestSuspectReported guards the message's format.
type slogWriter struct {
	log       *slog.Logger
	lim       *logbudget.Limiter
	level     slog.Level // of a line without a level tag
	component string
	onSuspect func(name string)
}

// newMemberlistLogger returns the *log.Logger memberlist writes to; lim may be shared with
// other loggers of the node (nil: a budget of its own).
func newMemberlistLogger(l *slog.Logger, lim *logbudget.Limiter, onSuspect func(string)) *log.Logger {
	if lim == nil {
		lim = logbudget.New(l, "gossip log lines")
	}
	return log.New(slogWriter{log: l, lim: lim, level: slog.LevelInfo, component: "memberlist", onSuspect: onSuspect}, "", 0)
}

// newServerErrorLog returns the ErrorLog of the transport's stream listener: its lines (a
// failed TLS handshake, a malformed request) are debug records within the budget lim.
func newServerErrorLog(l *slog.Logger, lim *logbudget.Limiter) *log.Logger {
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
	if w.log.Enabled(context.Background(), level) && w.lim.Allow() {
		w.log.Log(context.Background(), level, string(line), "component", w.component)
	}
	return len(p), nil
}
