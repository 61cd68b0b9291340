package cmd

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logSettings are the validated --log-format and --log-level.
type logSettings struct {
	json  bool
	level slog.Level
}

func newLogSettings(format, level string) (*logSettings, error) {
	var s logSettings
	switch format {
	case "text":
	case "json":
		s.json = true
	default:
		return nil, fmt.Errorf("--log-format %q: must be text or json", format)
	}
	if err := s.level.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: must be debug, info, warn or error", level)
	}
	return &s, nil
}

func (s *logSettings) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.level}
	if s.json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
