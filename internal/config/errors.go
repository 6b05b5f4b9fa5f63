package config

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is a problem with the value of one key of a configuration. Path
// is the key path in the dotted form of the file ("zones[0].ttl"); the file
// position is filled in by Load when the key is present in the file.
type FieldError struct {
	Path string
	Err  error

	// File, Line and Column locate the key; Line is 0 when unknown.
	File   string
	Line   int
	Column int
}

// Errorf returns a *FieldError for path with a formatted message.
func Errorf(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// Field wraps err as a *FieldError for path. When err already is (or joins)
// field errors, their paths are prefixed with path, so nested Validate
// methods can report paths relative to themselves. A nil err stays nil.
func Field(path string, err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range flatten(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			c := *fe
			c.Path = joinPath(path, fe.Path)
			errs = append(errs, &c)
			continue
		}
		errs = append(errs, &FieldError{Path: path, Err: e})
	}
	return errors.Join(errs...)
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// flatten returns the leaves of a tree of errors joined with errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func joinPath(prefix, rest string) string {
	switch {
	case prefix == "":
		return rest
	case rest == "":
		return prefix
	case strings.HasPrefix(rest, "["):
		return prefix + rest
	}
	return prefix + "." + rest
}
