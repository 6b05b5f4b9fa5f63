package auth

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestVerifyHeaderCache checks the decoded-header cache: a header is kept
// only once its token verified, a kept header changes no verdict, and the
// cache stays bounded.
func TestVerifyHeaderCache(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good := Claims{Tenant: "acme", Channels: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}
	expired := good
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Second))
	reason := func(err error) Reason {
		var e *Error
		if errors.As(err, &e) {
			return e.Reason
		}
		return ""
	}

	t.Run("a forged token leaves no header behind", func(t *testing.T) {
		v, err := New(Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: secret}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 * headerCacheMax {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, good)
			tok.Header["kid"] = fmt.Sprintf("junk-%d", i)
			forged, err := tok.SignedString([]byte("not the secret, 20 bytes"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(forged, now); reason(err) != ReasonForged {
				t.Fatalf("forged token %d: %v, want %s", i, err, ReasonForged)
			}
		}
		if n := v.nHeaders.Load(); n != 0 {
			t.Fatalf("%d headers kept from forged tokens, want 0", n)
		}
	})

	t.Run("a kept header changes no verdict", func(t *testing.T) {
		v, err := New(Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: secret}}})
		if err != nil {
			t.Fatal(err)
		}
		ok := sign(t, jwt.SigningMethodHS256, []byte(secret), good)
		for i := range 2 {
			if _, err := v.Verify(ok, now); err != nil {
				t.Fatalf("check %d of a good token: %v", i, err)
			}
		}
		if n := v.nHeaders.Load(); n != 1 {
			t.Fatalf("%d headers kept after a good token twice, want 1", n)
		}
		// The same header segment, now with a bad signature, an expired
		// token, and a token cut after its header.
		for _, tc := range []struct {
			name  string
			token string
			want  Reason
		}{
			{"forged under the kept header", sign(t, jwt.SigningMethodHS256, []byte("another secret of 20b"), good), ReasonForged},
			{"expired under the kept header", sign(t, jwt.SigningMethodHS256, []byte(secret), expired), ReasonExpired},
			{"alg=none", "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.e30.", ReasonForged},
		} {
			if _, err := v.Verify(tc.token, now); reason(err) != tc.want {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
			}
		}
	})

	t.Run("bounded", func(t *testing.T) {
		v, err := New(Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: secret}}})
		if err != nil {
			t.Fatal(err)
		}
		// A key without an id takes any kid: every header is distinct
		// and every token verifies.
		for i := range 3 * headerCacheMax {
			if _, err := v.Verify(signKid(t, fmt.Sprintf("k%d", i), good), now); err != nil {
				t.Fatalf("token %d: %v", i, err)
			}
		}
		kept := 0
		v.headers.Range(func(any, any) bool { kept++; return true })
		if n := v.nHeaders.Load(); n != headerCacheMax || kept != headerCacheMax {
			t.Fatalf("%d headers counted, %d kept; want %d", n, kept, headerCacheMax)
		}
	})
}

// TestVerifyClocksApart checks that concurrent checks each judge expiry at
// their own time, though they share the Verifier's pooled validators.
func TestVerifyClocksApart(t *testing.T) {
	v, err := New(Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Unix(1_800_000_000, 0)
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), Claims{Tenant: "acme", Channels: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(exp)}})
	before, after := exp.Add(-time.Minute), exp.Add(time.Minute)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 500 {
				now, want := before, Reason("")
				if (g+i)%2 == 1 {
					now, want = after, ReasonExpired
				}
				_, err := v.Verify(tok, now)
				var e *Error
				got := Reason("")
				if errors.As(err, &e) {
					got = e.Reason
				}
				if got != want {
					errs <- fmt.Errorf("goroutine %d, check %d at %v: reason %q, want %q", g, i, now, got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
