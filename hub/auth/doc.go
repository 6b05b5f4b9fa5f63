// Package auth checks the credentials of hub sessions and backends.
//
// A session presents a JWT (HMAC HS256/HS384/HS512 or Ed25519 EdDSA; the claims
// are validated with github.com/golang-jwt/jwt/v5's validator) whose claims name its tenant, the
// channel patterns it may subscribe to and publish on, and the highest
// priority it may claim. Verifier.Verify is what most callers want; it
// returns the Claims or an error, and never says more than "rejected" to the
// client (the reason is for logs and metrics).
//
// Channel patterns use the NATS wildcards on dot-separated parts: "*"
// matches one part, a trailing ">" matches one or more parts. Channels live
// in the tenant's namespace: the hub prefixes every channel with the
// token's tenant, so no pattern can reach another tenant.
//
// Backends publish with an API key (Keys) bound to a set of tenants.
package auth
