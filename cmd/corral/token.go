package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/hub/auth"
)

// tokenFlags are the flags of `corral token`.
type tokenFlags struct {
	secretEnv string
	algorithm string
	kid       string
	tenant    string
	channels  []string
	publish   []string
	priority  string
	ttl       time.Duration
	issuer    string
	audience  string
	subject   string
}

// newTokenCmd builds `corral token`: a development session token signed
// with an HMAC secret, in the format hub/auth verifies.
func newTokenCmd(g *globals) *cobra.Command {
	f := &tokenFlags{}
	cmd := &cobra.Command{
		Use:   "token --secret-env VAR --tenant T [--channels P,...] [--publish P,...] [--priority p0|p1|p2] [--ttl D]",
		Short: "Mint a development session token (HMAC JWT) for a hub",
		Long: `corral token prints a session token (a JWT signed with HMAC) that a hub
whose auth.keys hold the same secret accepts: the claims tenant, channels
(the patterns the holder may subscribe to: "*" is one dot-separated part, a
final ">" one or more), publish (the patterns it may publish on),
max_priority (the highest session priority) and exp (now + --ttl).

The secret is read from the environment variable --secret-env names, never
from the command line, so that it stays out of shell history and process
lists. It is for development and tests: in production the service that
knows its users signs their tokens.`,
		Example: `  export CORRAL_DEV_SECRET=dev-secret-change-me-0123456789   # the key of examples/hub.yaml
  corral token --secret-env CORRAL_DEV_SECRET --tenant demo --channels 'news.*' --priority p1 --ttl 1h`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			tok, err := mintToken(f, time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(g.stdout, tok)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.secretEnv, "secret-env", "", "environment variable holding the HMAC secret (at least 16 bytes; required)")
	fl.StringVar(&f.algorithm, "algorithm", "HS256", "HS256, HS384 or HS512")
	fl.StringVar(&f.kid, "kid", "", "key id put in the token header (must match the key's id when set)")
	fl.StringVar(&f.tenant, "tenant", "", "tenant: the namespace of every channel of the session (required)")
	fl.StringSliceVar(&f.channels, "channels", []string{">"}, "channel patterns the holder may subscribe to, comma-separated")
	fl.StringSliceVar(&f.publish, "publish", nil, "channel patterns the holder may publish on, comma-separated (default none)")
	fl.StringVar(&f.priority, "priority", "p2", "highest session priority the holder may claim: p0, p1 or p2")
	fl.DurationVar(&f.ttl, "ttl", time.Hour, "how long the token is valid")
	fl.StringVar(&f.issuer, "issuer", "", "iss claim (when the hub's auth.issuer is set)")
	fl.StringVar(&f.audience, "audience", "", "aud claim (when the hub's auth.audience is set)")
	fl.StringVar(&f.subject, "subject", "", "sub claim: who the token is for (logged by the hub)")
	return cmd
}

// mintToken signs the claims f describes, valid from now for f.ttl.
func mintToken(f *tokenFlags, now time.Time) (string, error) {
	if f.secretEnv == "" {
		return "", errors.New("token: --secret-env is required (the name of the variable holding the secret)")
	}
	secret := os.Getenv(f.secretEnv)
	if secret == "" {
		return "", fmt.Errorf("token: environment variable %s is empty", f.secretEnv)
	}
	if len(secret) < 16 {
		return "", fmt.Errorf("token: the secret in %s is %d bytes, a hub accepts at least 16", f.secretEnv, len(secret))
	}
	method := jwt.GetSigningMethod(f.algorithm)
	if _, ok := method.(*jwt.SigningMethodHMAC); !ok {
		return "", fmt.Errorf("token: --algorithm %q: want HS256, HS384 or HS512", f.algorithm)
	}
	if !auth.ValidTenant(f.tenant) {
		return "", fmt.Errorf("token: --tenant %q: want 1 to 64 letters, digits, '_' or '-'", f.tenant)
	}
	if f.ttl <= 0 {
		return "", fmt.Errorf("token: --ttl %v: must be positive", f.ttl)
	}
	rank, ok := parseRank(f.priority)
	if !ok {
		return "", fmt.Errorf("token: --priority %q: want p0, p1 or p2", f.priority)
	}
	for _, p := range append(append([]string(nil), f.channels...), f.publish...) {
		if err := checkPattern(p); err != nil {
			return "", fmt.Errorf("token: pattern %q: %w", p, err)
		}
	}
	claims := auth.Claims{
		Tenant: f.tenant, Channels: f.channels, Publish: f.publish, MaxPriority: &rank,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.issuer, Subject: f.subject,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(f.ttl)),
		},
	}
	if f.audience != "" {
		claims.Audience = jwt.ClaimStrings{f.audience}
	}
	t := jwt.NewWithClaims(method, claims)
	if f.kid != "" {
		t.Header["kid"] = f.kid
	}
	return t.SignedString([]byte(secret))
}

// parseRank reads p0, p1 or p2 (any case, or the digit) as a rank.
func parseRank(s string) (int, bool) {
	switch strings.ToLower(s) {
	case "p0", "0":
		return 0, true
	case "p1", "1":
		return 1, true
	case "p2", "2", "":
		return 2, true
	}
	return 2, false
}

// checkPattern refuses a channel pattern no channel can match: an empty
// part, or ">" anywhere but last.
func checkPattern(p string) error {
	parts := strings.Split(p, ".")
	for i, part := range parts {
		switch {
		case part == "":
			return errors.New("empty part")
		case part == ">" && i != len(parts)-1:
			return errors.New(`">" must be the last part`)
		case part != "*" && part != ">" && strings.ContainsAny(part, "*> $"):
			return errors.New(`"*" and ">" stand alone as a part`)
		}
	}
	return nil
}
