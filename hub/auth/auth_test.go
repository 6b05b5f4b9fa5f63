package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const secret = "0123456789abcdef0123"

func sign(t *testing.T, m jwt.SigningMethod, key any, c Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signKid signs c with the test secret under HS256 and names kid in the header.
func signKid(t *testing.T, kid string, c Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func prio(n int) *int { return &n }

func TestVerify(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := New(Config{Keys: []KeyConfig{
		{ID: "h1", Algorithm: "HS256", Secret: secret},
		{ID: "e1", Algorithm: "EdDSA", PublicKey: base64.StdEncoding.EncodeToString(pub)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	good := Claims{Tenant: "acme", Channels: []string{"news.>"}, MaxPriority: prio(1),
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}
	expired := good
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Second))
	badTenant := good
	badTenant.Tenant = "a.b"
	noExpiry := good
	noExpiry.ExpiresAt = nil

	tests := []struct {
		name   string
		token  string
		reason Reason // "" for accepted
	}{
		{"HMAC", sign(t, jwt.SigningMethodHS256, []byte(secret), good), ""},
		{"Ed25519", sign(t, jwt.SigningMethodEdDSA, priv, good), ""},
		{"missing", "", ReasonMissing},
		{"malformed", "not.a.jwt", ReasonMalformed},
		{"forged HMAC", sign(t, jwt.SigningMethodHS256, []byte("another secret of 20b"), good), ReasonForged},
		{"forged Ed25519", sign(t, jwt.SigningMethodEdDSA, otherPriv, good), ReasonForged},
		{"algorithm not configured", sign(t, jwt.SigningMethodHS512, []byte(secret), good), ReasonForged},
		{"unsigned", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good), ReasonForged},
		{"expired", sign(t, jwt.SigningMethodHS256, []byte(secret), expired), ReasonExpired},
		{"tenant that cannot be a namespace", sign(t, jwt.SigningMethodHS256, []byte(secret), badTenant), ReasonInvalid},
		{"no exp (required by default)", sign(t, jwt.SigningMethodHS256, []byte(secret), noExpiry), ReasonNoExpiry},
		{"kid of no key", signKid(t, "h2", good), ReasonForged},
		{"four segments", sign(t, jwt.SigningMethodHS256, []byte(secret), good) + ".x", ReasonMalformed},
		{"signature not base64url", sign(t, jwt.SigningMethodHS256, []byte(secret), good) + "!", ReasonMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(tc.token, now)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if c.Tenant != "acme" || c.Rank() != 1 || !c.CanSubscribe("news.eu") || c.CanPublish("news.eu") {
					t.Fatalf("claims = %+v", c)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != tc.reason {
				t.Fatalf("err = %v, want reason %q", err, tc.reason)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, channel string
		want             bool
	}{
		{"news", "news", true},
		{"news", "news.eu", false},
		{"news.*", "news.eu", true},
		{"news.*", "news.eu.fr", false},
		{"news.>", "news.eu.fr", true},
		{"news.>", "news", false},
		{"*.eu", "news.eu", true},
		{">", "anything.at.all", true},
		{"news.eu", "news.us", false},
	}
	for _, tc := range tests {
		if got := Match(tc.pattern, tc.channel); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.channel, got, tc.want)
		}
	}
}

func TestAbsentMaxPriorityIsLowest(t *testing.T) {
	if r := (&Claims{}).Rank(); r != 2 {
		t.Fatalf("rank = %d, want 2", r)
	}
}

func TestAPIKeys(t *testing.T) {
	v, err := New(Config{APIKeys: []APIKeyConfig{
		{Name: "billing", Key: "billing-key-0123456789", Tenants: []string{"acme"}},
		{Name: "ops", Key: "ops-key-0123456789abc", Tenants: []string{"*"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := v.CheckAPIKey("billing-key-0123456789", "acme"); err != nil || n != "billing" {
		t.Errorf("billing for acme: %q, %v", n, err)
	}
	if _, err := v.CheckAPIKey("ops-key-0123456789abc", "other"); err != nil {
		t.Errorf("wildcard key: %v", err)
	}
	refusals := []struct {
		name, key string
		reason    Reason // tenant: authenticated but not authorised; the others: not authenticated
	}{
		{"valid key for another tenant", "billing-key-0123456789", ReasonTenant},
		{"unknown key", "guess-0123456789abcdef", ReasonForged},
		{"no key", "", ReasonMissing},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.CheckAPIKey(tc.key, "other")
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != tc.reason {
				t.Fatalf("err = %v, want reason %q", err, tc.reason)
			}
		})
	}
}

func TestAllowNoExpiry(t *testing.T) {
	v, err := New(Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: secret}}, AllowNoExpiry: true})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), Claims{Tenant: "acme", Channels: []string{">"}})
	if _, err := v.Verify(tok, time.Unix(1_800_000_000, 0)); err != nil {
		t.Fatalf("allow_no_expiry: token without exp rejected: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"short secret", Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: "short"}}}},
		{"unknown algorithm", Config{Keys: []KeyConfig{{Algorithm: "RS256", Secret: secret}}}},
		{"EdDSA without key", Config{Keys: []KeyConfig{{Algorithm: "EdDSA"}}}},
		{"EdDSA bad key", Config{Keys: []KeyConfig{{Algorithm: "EdDSA", PublicKey: "AAAA"}}}},
		{"empty env", Config{Keys: []KeyConfig{{Algorithm: "HS256", SecretEnv: "CORRAL_TEST_SURELY_UNSET"}}}},
		{"API key without tenants", Config{APIKeys: []APIKeyConfig{{Key: "0123456789abcdef0"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
