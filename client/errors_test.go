package client

import (
	"errors"
	"fmt"
	"testing"

	"github.com/corralhq/corral/wire"
)

// TestTerminalClasses: every close the server says not to retry is
// terminal, in its class; retryable closes and transport errors are not.
func TestTerminalClasses(t *testing.T) {
	for _, tc := range []struct {
		code wire.CloseCode
		want error // nil: not terminal
	}{
		{wire.ClosePolicyViolation, ErrUnauthorized},
		{wire.CloseForbidden, ErrForbidden},
		{wire.CloseProtocolError, ErrPolicy},
		{wire.CloseInvalidPayload, ErrPolicy},
		{wire.CloseTooBig, ErrPolicy},
		{wire.CloseSubscriptionLimit, ErrPolicy},
		{wire.CloseBadRequest, ErrPolicy},
		{wire.CloseSessionReplaced, ErrPolicy},
		{wire.CloseTryAgainLater, nil},
		{wire.CloseGoingAway, nil},
		{wire.CloseSlowConsumer, nil},
		{wire.CloseInternal, nil},
		{wire.CloseResumeImpossible, nil},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			err := fmt.Errorf("dial: %w", wire.Close{Code: tc.code, Text: "x"})
			te := terminal(err)
			if tc.want == nil {
				if te != nil {
					t.Fatalf("%d read as terminal: %v", tc.code, te)
				}
				return
			}
			if te == nil || !errors.Is(te, tc.want) {
				t.Fatalf("%d: %v, want terminal %v", tc.code, te, tc.want)
			}
			var cl wire.Close
			if !errors.As(te, &cl) || cl.Code != tc.code {
				t.Fatalf("%d: errors.As finds %v", tc.code, cl)
			}
		})
	}
	if terminal(errors.New("connection refused")) != nil {
		t.Fatal("a transport error read as terminal")
	}
}
