package cmd

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// logSettings are the validated --log-format and --log-level.
type logSettings struct {
	json  bool
	level slog.Level
}

func newLogSettings(format, level string) (*logSettings, error) {
	var s logSettings
	switch strings.ToLower(format) {
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
	opts := &slog.HandlerOptions{Level: s.level, ReplaceAttr: durationsAsText}
	if s.json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationsAsText writes durations as Go writes them ("15s", "1.5ms") in
// both formats; JSON would otherwise get integer nanoseconds.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// errorLine writes leaderrun's last line, the error that ends it, in the
// log format the arguments and environment ask for: one JSON object for
// --log-format json, so that every line on stderr is one, else
// "leaderrun: ERROR".
func errorLine(w io.Writer, args []string, err error) {
	if !jsonRequested(args) {
		fmt.Fprintf(w, "leaderrun: %s\n", printable(err.Error()))
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error("leaderrun exits", "err", err.Error())
}

// warnLine writes a warning from before the logger exists, in the format
// errorLine uses.
func warnLine(w io.Writer, msg string) {
	if !jsonRequested(os.Args) {
		fmt.Fprintf(w, "leaderrun: warning: %s\n", printable(msg))
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Warn(msg)
}

// jsonRequested reports whether --log-format json (or
// LEADERRUN_LOG_FORMAT=json) was asked for, read from the arguments
// themselves, because the error may be that they did not parse.
func jsonRequested(args []string) bool {
	format := os.Getenv("LEADERRUN_LOG_FORMAT")
	for i, a := range args {
		switch {
		case a == "--log-format" && i+1 < len(args):
			format = args[i+1]
		case strings.HasPrefix(a, "--log-format="):
			format = strings.TrimPrefix(a, "--log-format=")
		}
	}
	return strings.EqualFold(format, "json")
}

// retryLine tells the operator of a client command (watch, step-down
// --wait) that a read failed and when it is tried again.
func retryLine(w io.Writer, what string, err error, backoff time.Duration) {
	fmt.Fprintf(w, "leaderrun: %s: %s (retrying in %v)\n", what, printable(err.Error()), backoff)
}

// printable is s with every control or otherwise unprintable character
// written as its Go escape (\x1b, \n, \u0085): error text comes from
// stores and servers, and must neither move the terminal nor forge a line.
// Printable text, quotes included, is left as it is.
func printable(s string) string {
	if strings.IndexFunc(s, unprintable) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unprintable(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r) // '\x1b', with its quotes
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

func unprintable(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }
