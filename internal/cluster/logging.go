package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// slogWriter turns memberlist's "[LEVEL] memberlist: message" log lines into slog records.
// It also reports this node's own suspicions to onSuspect: memberlist has no public way to tell
// that a node is suspect (its Node.State field is never set; the state lives in a private
// field), but it logs "Suspect NAME has failed, no acks received" when one of this node's
// probes fails. TestSuspectReported guards the message's format.
type slogWriter struct {
	log       *slog.Logger
	onSuspect func(name string)
}

func newMemberlistLogger(l *slog.Logger, onSuspect func(string)) *log.Logger {
	return log.New(slogWriter{l, onSuspect}, "", 0)
}

const (
	suspectPrefix = "Suspect "
	suspectSuffix = " has failed, no acks received"
)

func (w slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	level := slog.LevelInfo
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
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, string(line), "component", "memberlist")
	}
	return len(p), nil
}
