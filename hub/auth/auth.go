package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	id     string
	alg    string
	method jwt.SigningMethod
	key    any
	// macs holds HMAC states keyed with this secret (HS* keys only), so a
	// check does not rehash the secret's pads: one state per check, reset
	// before use; no result of a check is kept.
	macs *sync.Pool
}

// verify reports whether sig signs signed under k; sc is the check's
// scratch space.
func (k *key) verify(signed string, sig []byte, sc *scratch) bool {
	if k.macs == nil {
		return k.method.Verify(signed, sig, k.key) == nil
	}
	m := k.macs.Get().(hash.Hash)
	m.Reset()
	sc.buf = append(sc.buf[:0], signed...)
	_, _ = m.Write(sc.buf)
	ok := hmac.Equal(m.Sum(sc.sum[:0]), sig)
	k.macs.Put(m)
	return ok
}

// scratch is the memory a check writes and drops: the bytes of the signed
// part for the MAC, the MAC's sum, the decoded claims. A hash.Hash takes
// bytes, so io.WriteString copied the signed part into a new slice, and
// the sum passed through the interface escaped; with the base64 decode of
// the claims they were 3 allocations and about 300 B of each session
// set-up (bench/hub/run.sh instructions; issue 10, item 13). A Verifier
// keeps them in a pool, wiped when a check ends.
type scratch struct {
	buf []byte
	sum [sha512.Size]byte
}

// scratchMax bounds the buffer a scratch keeps for the next check (a
// huge token is not held on to).
const scratchMax = 4 << 10

// getScratch returns a scratch space for one check.
func (v *Verifier) getScratch() *scratch {
	if sc, ok := v.scratch.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// putScratch wipes sc and keeps it for another check.
func (v *Verifier) putScratch(sc *scratch) {
	if cap(sc.buf) > scratchMax {
		return
	}
	clear(sc.buf)
	sc.buf = sc.buf[:0]
	sc.sum = [sha512.Size]byte{}
	v.scratch.Put(sc)
}

type apiKey struct {
	name    string
	hash    [32]byte
	tenants []string
}

// Verifier checks session tokens and backend API keys. Create it with New;
// its configuration is immutable and it is safe for concurrent use.
type Verifier struct {
	cfg     Config
	keys    []key
	apiKeys []apiKey
	methods []string
	// opts are the claim checks of cfg, without the clock.
	opts []jwt.ParserOption
	// validators holds *clocked: golang-jwt's claims validator with
	// opts, each with its own clock.
	validators sync.Pool
	// headers holds the decoded JOSE headers of tokens that verified,
	// by their base64 segment (string -> header), at most
	// headerCacheMax of them; nHeaders counts the entries.
	headers  sync.Map
	nHeaders atomic.Int32
	// scratch holds *scratch: a check's scratch space.
	scratch sync.Pool
}

// headerCacheMax bounds the headers a Verifier keeps decoded. Every token
// of one issuer and key carries the same header segment, so a fleet needs
// one entry a key; decoding that segment with encoding/json was 5 % of a
// hub's CPU under a dial storm (issue 10, item 13). Only the headers of
// tokens whose signature verified are kept, so a client without a key
// cannot fill the cache.
const headerCacheMax = 16

// header returns the decoded header segment seg, and whether it came from
// the cache.
func (v *Verifier) header(seg string) (header, bool, error) {
	if h, ok := v.headers.Load(seg); ok {
		return h.(header), true, nil
	}
	var h header
	err := decodeSegment(seg, &h)
	return h, false, err
}

// keepHeader caches h, the header segment seg of a token that verified,
// while the cache has room.
func (v *Verifier) keepHeader(seg string, h header) {
	if v.nHeaders.Add(1) > headerCacheMax {
		v.nHeaders.Add(-1)
		return
	}
	if _, loaded := v.headers.LoadOrStore(strings.Clone(seg), h); loaded {
		v.nHeaders.Add(-1)
	}
}

// New builds a Verifier from a valid Config.
func New(cfg Config) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := &Verifier{cfg: cfg}
	for _, k := range cfg.Keys {
		m, _ := k.material()
		kk := key{id: k.ID, alg: k.Algorithm, method: jwt.GetSigningMethod(k.Algorithm), key: m}
		if hm, ok := kk.method.(*jwt.SigningMethodHMAC); ok {
			secret, h := m.([]byte), hm.Hash.New
			kk.macs = &sync.Pool{New: func() any { return hmac.New(h, secret) }}
		}
		v.keys = append(v.keys, kk)
		if !slices.Contains(v.methods, k.Algorithm) {
			v.methods = append(v.methods, k.Algorithm)
		}
	}
	for _, k := range cfg.APIKeys {
		s, _ := k.secret()
		v.apiKeys = append(v.apiKeys, apiKey{name: k.Name, hash: sha256.Sum256([]byte(s)), tenants: k.Tenants})
	}
	v.opts = []jwt.ParserOption{jwt.WithLeeway(cfg.Leeway)}
	if cfg.Issuer != "" {
		v.opts = append(v.opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		v.opts = append(v.opts, jwt.WithAudience(cfg.Audience))
	}
	if !cfg.AllowNoExpiry {
		v.opts = append(v.opts, jwt.WithExpirationRequired())
	}
	v.validators.New = func() any {
		c := new(clocked)
		c.v = jwt.NewValidator(append(v.opts[:len(v.opts):len(v.opts)], jwt.WithTimeFunc(c.now))...)
		return c
	}
	return v, nil
}

// clocked is a claims validator whose clock reads at. golang-jwt takes a
// validator's clock only as an option when it builds one, and building
// one for each check (with the closure of its time) was 5 of a check's
// allocations: a Verifier keeps them in a pool, and a check sets the
// clock of the one it holds alone.
type clocked struct {
	at time.Time
	v  *jwt.Validator
}

func (c *clocked) now() time.Time { return c.at }

// validate checks claims with the options of v at time now.
func (v *Verifier) validate(claims *Claims, now time.Time) error {
	c := v.validators.Get().(*clocked)
	c.at = now
	err := c.v.Validate(claims)
	c.at = time.Time{}
	v.validators.Put(c)
	return err
}

// header is what Verify reads of a token's JOSE header.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// decodeSegment decodes one base64url (unpadded) segment of a token as JSON
// into dst.
func decodeSegment(seg string, dst any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

// Verify checks token at time now and returns its claims. The error is an
// *Error whose Reason says why.
//
// It decodes the claims once and the header once per distinct header of
// a token that verified (kept by Verifier, see headerCacheMax): the
// header's alg must be one of the configured keys' algorithms (alg=none
// never is), the signature must verify under a key of that algorithm (and kid, when both name one),
// then golang-jwt's validator checks exp (required unless AllowNoExpiry),
// nbf, iss and aud with the leeway, and Verify the tenant and max_priority.
func (v *Verifier) Verify(token string, now time.Time) (*Claims, error) {
	if token == "" {
		return nil, &Error{Reason: ReasonMissing}
	}
	if len(v.keys) == 0 {
		return nil, &Error{Reason: ReasonForged, Err: errors.New("no verification key configured")}
	}
	dot := strings.LastIndexByte(token, '.')
	if dot < 0 {
		return nil, &Error{Reason: ReasonMalformed, Err: errors.New("token contains an invalid number of segments")}
	}
	signed, sig64 := token[:dot], token[dot+1:]
	h64, c64, ok := strings.Cut(signed, ".")
	if !ok || strings.IndexByte(c64, '.') >= 0 {
		return nil, &Error{Reason: ReasonMalformed, Err: errors.New("token contains an invalid number of segments")}
	}
	h, cached, err := v.header(h64)
	if err != nil {
		return nil, &Error{Reason: ReasonMalformed, Err: fmt.Errorf("header: %w", err)}
	}
	if !slices.Contains(v.methods, h.Alg) {
		return nil, &Error{Reason: ReasonForged, Err: fmt.Errorf("signing method %q is not accepted", h.Alg)}
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil {
		return nil, &Error{Reason: ReasonMalformed, Err: fmt.Errorf("signature: %w", err)}
	}
	sc := v.getScratch()
	defer v.putScratch(sc)
	verified, candidates := false, 0
	for i := range v.keys {
		k := &v.keys[i]
		if k.alg != h.Alg || h.Kid != "" && k.id != "" && h.Kid != k.id {
			continue
		}
		candidates++
		if k.verify(signed, sig, sc) {
			verified = true
			break
		}
	}
	switch {
	case candidates == 0:
		return nil, &Error{Reason: ReasonForged, Err: errors.New("no key for this algorithm and kid")}
	case !verified:
		return nil, &Error{Reason: ReasonForged, Err: jwt.ErrTokenSignatureInvalid}
	}
	if !cached {
		v.keepHeader(h64, h)
	}
	claims := &Claims{}
	if err := decodeClaims(c64, claims, sc); err != nil {
		return nil, &Error{Reason: ReasonMalformed, Err: fmt.Errorf("claims: %w", err)}
	}
	if err := v.validate(claims, now); err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && claims.ExpiresAt == nil && !v.cfg.AllowNoExpiry:
			return nil, &Error{Reason: ReasonNoExpiry, Err: err}
		case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet):
			return nil, &Error{Reason: ReasonExpired, Err: err}
		}
		return nil, &Error{Reason: ReasonInvalid, Err: err}
	}
	if !ValidTenant(claims.Tenant) {
		return nil, &Error{Reason: ReasonInvalid, Err: fmt.Errorf("tenant %q", claims.Tenant)}
	}
	if r := claims.Rank(); r < 0 || r > 2 {
		return nil, &Error{Reason: ReasonInvalid, Err: fmt.Errorf("max_priority %d", r)}
	}
	return claims, nil
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
