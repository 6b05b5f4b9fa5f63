package client

import (
	"errors"

	"github.com/corralhq/corral/wire"
)

// The classes of terminal errors: test with errors.Is.
var (
	// ErrUnauthorized: the server rejected the token (missing, forged,
	// expired, revoked, or a priority above the token's): close 1008.
	ErrUnauthorized = errors.New("client: token rejected")
	// ErrForbidden: the token does not allow what was asked: close 4005.
	ErrForbidden = errors.New("client: forbidden")
	// ErrPolicy: any other close the server says not to retry (1002,
	// 1007, 1009, 4001, 4004, 4007).
	ErrPolicy = errors.New("client: refused, not to be retried")
)

// TerminalError is why a client stopped for good: a close the server sent
// whose code is not retryable, after one attempt. errors.Is matches one of
// ErrUnauthorized, ErrForbidden or ErrPolicy; errors.As finds the
// wire.Close.
type TerminalError struct {
	Close wire.Close
}

func (e *TerminalError) class() error {
	switch e.Close.Code {
	case wire.ClosePolicyViolation:
		return ErrUnauthorized
	case wire.CloseForbidden:
		return ErrForbidden
	}
	return ErrPolicy
}

func (e *TerminalError) Error() string { return e.class().Error() + ": " + e.Close.Error() }

// Unwrap returns the class and the close.
func (e *TerminalError) Unwrap() []error { return []error{e.class(), e.Close} }

// terminal returns err as a *TerminalError when it is a close the server
// sent that must not be retried, else nil.
func terminal(err error) *TerminalError {
	var te *TerminalError
	if errors.As(err, &te) {
		return te
	}
	var cl wire.Close
	if errors.As(err, &cl) && !cl.Code.Retryable() {
		return &TerminalError{Close: cl}
	}
	return nil
}
