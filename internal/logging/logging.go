// Package logging builds the log/slog logger every corral command uses:
// text on a terminal, JSON otherwise, at a level named on the command line.
//
// The package imports nothing of corral.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Format names how records are written.
type Format string

// The formats New accepts. Auto picks Text on a terminal and JSON elsewhere.
const (
	Auto Format = "auto"
	Text Format = "text"
	JSON Format = "json"
)

// ParseLevel reads "debug", "info", "warn" or "error" (any case).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("logging: level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// New returns a logger writing to w at the named level and format.
func New(w io.Writer, level string, format Format) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	if format == "" || format == Auto {
		format = JSON
		if IsTerminal(w) {
			format = Text
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case Text:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case JSON:
		opts.ReplaceAttr = durationText
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("logging: format %q: want auto, text or json", format)
}

// durationText writes a duration as the text handler and the config files
// do ("10s"), not as JSON's integer of nanoseconds (10000000000).
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// IsTerminal reports whether w is a character device, such as a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
