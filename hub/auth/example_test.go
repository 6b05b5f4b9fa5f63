package auth_test

import (
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/hub/auth"
)

// A backend signs a session token with the shared HMAC secret; the hub
// verifies it and learns the tenant, the channels and the priority.
func ExampleVerifier_Verify() {
	v, err := auth.New(auth.Config{Keys: []auth.KeyConfig{{Algorithm: "HS256", Secret: "a-secret-of-at-least-16-bytes"}}})
	if err != nil {
		panic(err)
	}
	p1 := 1
	now := time.Unix(1_800_000_000, 0)
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{"chat.*"}, MaxPriority: &p1,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
	}).SignedString([]byte("a-secret-of-at-least-16-bytes"))

	c, err := v.Verify(token, now)
	fmt.Println(c.Tenant, c.Rank(), c.CanSubscribe("chat.room1"), c.CanSubscribe("admin.logs"), err)
	_, err = v.Verify(token, now.Add(2*time.Hour))
	fmt.Println(err.(*auth.Error).Reason)
	// Output:
	// acme 1 true false <nil>
	// expired
}

// A token without exp is refused by default; AllowNoExpiry is the explicit
// opt-out.
func ExampleConfig_allowNoExpiry() {
	keys := []auth.KeyConfig{{Algorithm: "HS256", Secret: "a-secret-of-at-least-16-bytes"}}
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{"chat.*"},
	}).SignedString([]byte("a-secret-of-at-least-16-bytes"))

	strict, _ := auth.New(auth.Config{Keys: keys})
	_, err := strict.Verify(token, time.Now())
	fmt.Println(err.(*auth.Error).Reason)
	lax, _ := auth.New(auth.Config{Keys: keys, AllowNoExpiry: true})
	_, err = lax.Verify(token, time.Now())
	fmt.Println(err)
	// Output:
	// no_expiry
	// <nil>
}
