package agent

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLogger returns the agent's structured logger writing to w at level ("debug", "info",
// "warn", "error") in format ("text" or "json"). Its level can be changed later (a reload of
// --log-level): see setLogLevel.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	lv := new(slog.LevelVar)
	lv.Set(l)
	opt := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(levelled{slog.NewTextHandler(w, opt), lv}), nil
	case "json":
		return slog.New(levelled{slog.NewJSONHandler(w, opt), lv}), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// levelled is a handler whose level is a LevelVar shared with every handler derived from it
// (With, WithGroup): setting it changes the level of every subsystem's logger at once.
type levelled struct {
	slog.Handler
	lv *slog.LevelVar
}

func (h levelled) WithAttrs(as []slog.Attr) slog.Handler {
	return levelled{h.Handler.WithAttrs(as), h.lv}
}
func (h levelled) WithGroup(n string) slog.Handler { return levelled{h.Handler.WithGroup(n), h.lv} }

// setLogLevel sets the level of log, when NewLogger made it; it reports whether it could.
func setLogLevel(log *slog.Logger, level string) (bool, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return false, fmt.Errorf("--log-level: %w", err)
	}
	h, ok := log.Handler().(levelled)
	if !ok {
		return false, nil
	}
	h.lv.Set(l)
	return true, nil
}
