package agent

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLogger returns the agent's structured logger writing to w at level ("debug", "info",
// "warn", "error") in format ("text" or "json").
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opt := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opt)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opt)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
