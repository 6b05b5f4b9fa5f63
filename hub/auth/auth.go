package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims are what a session token grants.
type Claims struct {
	jwt.RegisteredClaims
	// Tenant is the namespace of every channel of the session.
	Tenant string `json:"tenant"`
	// Channels are the patterns the holder may subscribe to.
	Channels []string `json:"channels"`
	// Publish are the patterns the holder may publish on.
	Publish []string `json:"publish,omitempty"`
	// MaxPriority is the highest priority the holder may claim, as a rank:
	// 0 (P0, the highest), 1 or 2. Absent means 2.
	MaxPriority *int `json:"max_priority,omitempty"`
}

// Rank returns the highest priority rank the claims allow (0 is P0).
func (c *Claims) Rank() int {
	if c.MaxPriority == nil {
		return 2
	}
	return *c.MaxPriority
}

// CanSubscribe reports whether channel (in the tenant's namespace) matches
// one of the Channels patterns.
func (c *Claims) CanSubscribe(channel string) bool { return matchAny(c.Channels, channel) }

// CanPublish reports whether channel matches one of the Publish patterns.
func (c *Claims) CanPublish(channel string) bool { return matchAny(c.Publish, channel) }

func matchAny(patterns []string, channel string) bool {
	for _, p := range patterns {
		if Match(p, channel) {
			return true
		}
	}
	return false
}

// Match reports whether channel matches pattern: parts are separated by
// dots, "*" matches one part and a final ">" matches one or more parts.
func Match(pattern, channel string) bool {
	for {
		pp, prest, pmore := strings.Cut(pattern, ".")
		if pp == ">" && !pmore {
			return channel != ""
		}
		cp, crest, cmore := strings.Cut(channel, ".")
		if pp != "*" && pp != cp {
			return false
		}
		if pmore != cmore {
			return false
		}
		if !pmore {
			return true
		}
		pattern, channel = prest, crest
	}
}

// ValidTenant reports whether name can be a tenant: 1 to 64 letters,
// digits, '_' or '-'.
func ValidTenant(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Reason classifies a rejection for metrics and logs.
type Reason string

// The rejection reasons of Verify.
const (
	ReasonMissing   Reason = "missing"
	ReasonMalformed Reason = "malformed"
	ReasonForged    Reason = "forged"
	ReasonExpired   Reason = "expired"
	// ReasonNoExpiry is a token without exp, refused unless
	// Config.AllowNoExpiry is set.
	ReasonNoExpiry Reason = "no_expiry"
	ReasonInvalid  Reason = "invalid"
	// ReasonTenant is a valid API key used for a tenant it does not serve:
	// the backend is authenticated but not authorised (HTTP 403, gRPC
	// PermissionDenied), unlike the other reasons (401, Unauthenticated).
	ReasonTenant Reason = "tenant"
)

// Error is a rejected credential.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "auth: token " + string(e.Reason)
	}
	return "auth: token " + string(e.Reason) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

type key struct {
	id  string
	alg string
	key any
}

type apiKey struct {
	name    string
	hash    [32]byte
	tenants []string
}

// Verifier checks session tokens and backend API keys. Create it with New;
// it is immutable and safe for concurrent use.
type Verifier struct {
	cfg     Config
	keys    []key
	apiKeys []apiKey
	methods []string
}

// New builds a Verifier from a valid Config.
func New(cfg Config) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := &Verifier{cfg: cfg}
	for _, k := range cfg.Keys {
		m, _ := k.material()
		v.keys = append(v.keys, key{id: k.ID, alg: k.Algorithm, key: m})
		if !slices.Contains(v.methods, k.Algorithm) {
			v.methods = append(v.methods, k.Algorithm)
		}
	}
	for _, k := range cfg.APIKeys {
		s, _ := k.secret()
		v.apiKeys = append(v.apiKeys, apiKey{name: k.Name, hash: sha256.Sum256([]byte(s)), tenants: k.Tenants})
	}
	return v, nil
}

// Verify checks token at time now and returns its claims. The error is an
// *Error whose Reason says why.
func (v *Verifier) Verify(token string, now time.Time) (*Claims, error) {
	if token == "" {
		return nil, &Error{Reason: ReasonMissing}
	}
	if len(v.keys) == 0 {
		return nil, &Error{Reason: ReasonForged, Err: errors.New("no verification key configured")}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithLeeway(v.cfg.Leeway),
	}
	if v.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.cfg.Issuer))
	}
	if v.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.cfg.Audience))
	}
	if !v.cfg.AllowNoExpiry {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	claims := &Claims{}
	_, lastErr := jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		var set jwt.VerificationKeySet
		for _, k := range v.keys {
			if k.alg == t.Method.Alg() && (kid == "" || k.id == "" || kid == k.id) {
				set.Keys = append(set.Keys, k.key)
			}
		}
		if len(set.Keys) == 0 {
			return nil, errors.New("no key for this algorithm and kid")
		}
		return set, nil
	}, opts...)
	if lastErr == nil {
		if !ValidTenant(claims.Tenant) {
			return nil, &Error{Reason: ReasonInvalid, Err: fmt.Errorf("tenant %q", claims.Tenant)}
		}
		if r := claims.Rank(); r < 0 || r > 2 {
			return nil, &Error{Reason: ReasonInvalid, Err: fmt.Errorf("max_priority %d", r)}
		}
		return claims, nil
	}
	switch {
	case errors.Is(lastErr, jwt.ErrTokenRequiredClaimMissing) && claims.ExpiresAt == nil && !v.cfg.AllowNoExpiry:
		return nil, &Error{Reason: ReasonNoExpiry, Err: lastErr}
	case errors.Is(lastErr, jwt.ErrTokenMalformed):
		return nil, &Error{Reason: ReasonMalformed, Err: lastErr}
	case errors.Is(lastErr, jwt.ErrTokenExpired), errors.Is(lastErr, jwt.ErrTokenNotValidYet):
		return nil, &Error{Reason: ReasonExpired, Err: lastErr}
	case errors.Is(lastErr, jwt.ErrTokenSignatureInvalid), errors.Is(lastErr, jwt.ErrTokenUnverifiable), errors.Is(lastErr, jwt.ErrSignatureInvalid):
		return nil, &Error{Reason: ReasonForged, Err: lastErr}
	}
	return nil, &Error{Reason: ReasonInvalid, Err: lastErr}
}

// CheckAPIKey returns the name of the API key secret if it may publish for
// tenant, or an *Error: ReasonMissing or ReasonForged when the key is absent
// or unknown (not authenticated), ReasonTenant when the key is valid but
// does not serve tenant (authenticated, not authorised). It compares in
// constant time.
func (v *Verifier) CheckAPIKey(secret, tenant string) (string, error) {
	if secret == "" {
		return "", &Error{Reason: ReasonMissing}
	}
	h := sha256.Sum256([]byte(secret))
	for _, k := range v.apiKeys {
		if subtle.ConstantTimeCompare(h[:], k.hash[:]) == 1 {
			if slices.Contains(k.tenants, "*") || slices.Contains(k.tenants, tenant) {
				return k.name, nil
			}
			return "", &Error{Reason: ReasonTenant, Err: fmt.Errorf("API key %q may not publish for tenant %q", k.name, tenant)}
		}
	}
	return "", &Error{Reason: ReasonForged, Err: errors.New("unknown API key")}
}
