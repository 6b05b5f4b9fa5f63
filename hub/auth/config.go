package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/internal/config"
)

// Config lists the keys that may sign session tokens and the API keys of
// backends. The zero value accepts no token and no API key.
type Config struct {
	// Keys verify session JWTs. A token whose header names a kid must match
	// a key with that ID; a token without kid is tried against every key of
	// its algorithm.
	Keys []KeyConfig `yaml:"keys"`
	// Issuer, when set, must equal the token's iss claim.
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be among the token's aud claim.
	Audience string `yaml:"audience"`
	// Leeway tolerates clock skew on exp, nbf and iat. Default 0.
	Leeway time.Duration `yaml:"leeway"`
	// AllowNoExpiry accepts tokens without exp, which are then valid for
	// ever. The default (false) rejects them (reason no_expiry): a token
	// that leaks must stop working by itself.
	AllowNoExpiry bool `yaml:"allow_no_expiry"`
	// APIKeys authenticate backends on the publish APIs.
	APIKeys []APIKeyConfig `yaml:"api_keys"`
}

// KeyConfig is one token-verification key.
type KeyConfig struct {
	// ID is matched against the token header's kid. Optional.
	ID string `yaml:"id"`
	// Algorithm is "HS256", "HS384", "HS512" or "EdDSA".
	Algorithm string `yaml:"algorithm"`
	// Secret is the HMAC secret (HS*), literally. Prefer SecretEnv.
	Secret string `yaml:"secret"`
	// SecretEnv names an environment variable holding the HMAC secret.
	SecretEnv string `yaml:"secret_env"`
	// PublicKey is the Ed25519 public key (EdDSA): PEM, or 32 bytes in
	// standard base64.
	PublicKey string `yaml:"public_key"`
}

// APIKeyConfig is one backend API key.
type APIKeyConfig struct {
	// Name labels the key in logs and metrics.
	Name string `yaml:"name"`
	// Key is the secret the backend sends ("Authorization: Bearer <key>").
	// Prefer KeyEnv.
	Key string `yaml:"key"`
	// KeyEnv names an environment variable holding the key.
	KeyEnv string `yaml:"key_env"`
	// Tenants the key may publish for; "*" allows every tenant.
	Tenants []string `yaml:"tenants"`
}

// Validate checks every key (it reads the environment variables named).
func (c Config) Validate() error {
	for i, k := range c.Keys {
		if _, err := k.material(); err != nil {
			return config.Field(fmt.Sprintf("keys[%d]", i), err)
		}
	}
	if c.Leeway < 0 {
		return config.Errorf("leeway", "auth: must not be negative, got %v", c.Leeway)
	}
	for i, k := range c.APIKeys {
		p := fmt.Sprintf("api_keys[%d]", i)
		if _, err := k.secret(); err != nil {
			return config.Field(p, err)
		}
		if len(k.Tenants) == 0 {
			return config.Errorf(p+".tenants", "auth: list at least one tenant (or \"*\")")
		}
		for j, t := range k.Tenants {
			if t != "*" && !ValidTenant(t) {
				return config.Errorf(fmt.Sprintf("%s.tenants[%d]", p, j), "auth: %q is not a valid tenant name", t)
			}
		}
	}
	return nil
}

// material returns the verification key of k.
func (k KeyConfig) material() (any, error) {
	switch k.Algorithm {
	case "HS256", "HS384", "HS512":
		s := k.Secret
		if k.SecretEnv != "" {
			if s != "" {
				return nil, config.Errorf("secret_env", "auth: set secret or secret_env, not both")
			}
			s = os.Getenv(k.SecretEnv)
			if s == "" {
				return nil, config.Errorf("secret_env", "auth: environment variable %s is empty", k.SecretEnv)
			}
		}
		if len(s) < 16 {
			return nil, config.Errorf("secret", "auth: HMAC secret must be at least 16 bytes")
		}
		return []byte(s), nil
	case "EdDSA":
		p := strings.TrimSpace(k.PublicKey)
		if p == "" {
			return nil, config.Errorf("public_key", "auth: EdDSA needs public_key")
		}
		if strings.HasPrefix(p, "-----BEGIN") {
			pk, err := jwt.ParseEdPublicKeyFromPEM([]byte(p))
			if err != nil {
				return nil, config.Errorf("public_key", "auth: %v", err)
			}
			return pk, nil
		}
		b, err := base64.StdEncoding.DecodeString(p)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, config.Errorf("public_key", "auth: want PEM or 32 bytes of base64")
		}
		return ed25519.PublicKey(b), nil
	case "":
		return nil, config.Errorf("algorithm", "auth: missing (HS256, HS384, HS512 or EdDSA)")
	}
	return nil, config.Errorf("algorithm", "auth: %q: want HS256, HS384, HS512 or EdDSA", k.Algorithm)
}

func (k APIKeyConfig) secret() (string, error) {
	s := k.Key
	if k.KeyEnv != "" {
		if s != "" {
			return "", config.Errorf("key_env", "auth: set key or key_env, not both")
		}
		s = os.Getenv(k.KeyEnv)
		if s == "" {
			return "", config.Errorf("key_env", "auth: environment variable %s is empty", k.KeyEnv)
		}
	}
	if len(s) < 16 {
		return "", config.Errorf("key", "auth: API key must be at least 16 bytes")
	}
	return s, nil
}
