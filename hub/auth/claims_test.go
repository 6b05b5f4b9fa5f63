package auth

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// plainClaims are claims in the form issuers write; decodeClaims reads
// them without encoding/json.
var plainClaims = []string{
	`{"sub":"bench","exp":1796282705,"tenant":"bench","channels":["\u003e"],"publish":["\u003e"]}`,
	`{}`,
	` { "tenant" : "acme" , "channels" : [ "news.>" , "chat.*" ] , "max_priority" : 0 } `,
	"{\n\t\"tenant\": \"acme\",\r\n\t\"channels\": []\n}",
	`{"iss":"issuer","sub":"u1","aud":"hub","exp":1,"nbf":0,"iat":-5,"jti":"id-1","tenant":"t","channels":["a"],"publish":[],"max_priority":2}`,
	`{"aud":["hub","edge"],"exp":999999999999999,"tenant":"t","max_priority":-0}`,
	`{"aud":[],"tenant":"t"}`,
	`{"tenant":"a\"b\\c\/d\b\f\n\r\t\u0000\u00e9\uFFFF\u20AC","channels":["\u002e"]}`,
	`{"channels":["x\u007f"]}`,
	`{"max_priority":123456789}`,
	`{"ten\u0061nt":"escaped key"}`,
}

// otherClaims fall back to encoding/json (valid or not): each decodes to
// what json.Unmarshal makes of it, error or not.
var otherClaims = []string{
	``,
	`null`,
	`[]`,
	`{"tenant":"a","tenant":"b"}`,
	`{"tenant":"a","Tenant":"b"}`,
	`{"TENANT":"x"}`,
	`{"tenant":null}`,
	`{"aud":null}`,
	`{"exp":null}`,
	`{"channels":null}`,
	`{"max_priority":null}`,
	`{"unknown":1,"tenant":"t"}`,
	`{"tenant":"é"}`,
	"{\"tenant\":\"\xff\"}",
	`{"tenant":"\ud83d\ude00"}`,
	`{"tenant":"\ud83d"}`,
	`{"tenant":"\u12"}`,
	`{"tenant":"\u12G4"}`,
	`{"tenant":"\x"}`,
	`{"exp":1.5}`,
	`{"exp":1e9}`,
	`{"exp":1E9}`,
	`{"exp":01}`,
	`{"exp":-}`,
	`{"exp":9999999999999999}`,
	`{"exp":"1"}`,
	`{"max_priority":1.0}`,
	`{"max_priority":1234567890}`,
	`{"max_priority":"1"}`,
	`{"channels":[1]}`,
	`{"channels":["a",]}`,
	`{"channels":"a"}`,
	`{"aud":1}`,
	`{"aud":["a",1]}`,
	`{"tenant":"t",}`,
	`{"tenant":"t"} x`,
	`{"tenant":"t"}{}`,
	`{"tenant" "t"}`,
	`{"tenant":"t"`,
	`{"tenant":"t`,
	"{\"tenant\":\"a\tb\"}",
	"\ufeff{}",
	`{"sub":{"a":1}}`,
}

// decodeJSON is the reference: encoding/json into a zero Claims.
func decodeJSON(b []byte) (Claims, error) {
	var c Claims
	err := json.Unmarshal(b, &c)
	return c, err
}

func TestDecodeClaimsPlainForm(t *testing.T) {
	for _, in := range plainClaims {
		t.Run(in, func(t *testing.T) {
			want, err := decodeJSON([]byte(in))
			if err != nil {
				t.Fatalf("encoding/json refuses a plain form: %v", err)
			}
			var got Claims
			if !fastClaims([]byte(in), &got) {
				t.Fatal("fastClaims fell back on the plain form")
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fastClaims:\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

func TestDecodeClaimsFallsBack(t *testing.T) {
	for _, in := range otherClaims {
		t.Run(in, func(t *testing.T) {
			var fast Claims
			if fastClaims([]byte(in), &fast) {
				t.Fatalf("fastClaims took %q (%#v): it is encoding/json's to decode", in, fast)
			}
			checkSameAsJSON(t, []byte(in))
		})
	}
}

// checkSameAsJSON checks that unmarshalClaims decodes b as encoding/json
// does: both refuse it, or both make the same claims.
func checkSameAsJSON(t *testing.T, b []byte) {
	t.Helper()
	want, wantErr := decodeJSON(b)
	var got Claims
	err := unmarshalClaims(b, &got)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: unmarshalClaims error %v, encoding/json %v", b, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: unmarshalClaims\n got %#v\nwant %#v", b, got, want)
	}
	var fast Claims
	if fastClaims(b, &fast) && wantErr != nil {
		t.Fatalf("%q: fastClaims took what encoding/json refuses (%v)", b, wantErr)
	}
}

// TestDecodeClaimsTimePrecision: dates follow jwt.TimePrecision on both
// paths (an embedder may set it).
func TestDecodeClaimsTimePrecision(t *testing.T) {
	old := jwt.TimePrecision
	t.Cleanup(func() { jwt.TimePrecision = old })
	jwt.TimePrecision = time.Hour
	checkSameAsJSON(t, []byte(`{"exp":1796282705,"nbf":1796280000}`))
	var c Claims
	if !fastClaims([]byte(`{"exp":1796282705}`), &c) || c.ExpiresAt.Unix()%3600 != 0 {
		t.Fatalf("exp %v: not truncated to the hour", c.ExpiresAt)
	}
}

// FuzzDecodeClaims: whatever the input, decodeClaims's result is
// encoding/json's, and the fast path takes nothing encoding/json refuses.
func FuzzDecodeClaims(f *testing.F) {
	for _, s := range plainClaims {
		f.Add([]byte(s))
	}
	for _, s := range otherClaims {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSameAsJSON(t, b) })
}

// TestVerifyScratchCarriesNothingOver: checks of tokens of different
// lengths, one after another on the same Verifier (so on reused scratch
// space), each return their own claims, and a forged one after a valid
// one is refused.
func TestVerifyScratchCarriesNothingOver(t *testing.T) {
	v, err := New(Config{Keys: []KeyConfig{{Algorithm: "HS256", Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	sign := func(c Claims) string {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(time.Hour))
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	long := Claims{Tenant: "long", Channels: []string{"a.very.long.channel.pattern.>", "another.long.one.*", "x"}, Publish: []string{"p.>"}}
	short := Claims{Tenant: "s", Channels: []string{"c"}}
	toks := []string{sign(long), sign(short)}
	want := []Claims{long, short}
	forged := toks[1][:len(toks[1])-2] + "AA"
	for i := range 50 {
		j := i % 2
		got, err := v.Verify(toks[j], now)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if got.Tenant != want[j].Tenant || !reflect.DeepEqual(got.Channels, want[j].Channels) || !reflect.DeepEqual(got.Publish, want[j].Publish) {
			t.Fatalf("check %d: claims %+v, want %+v", i, got, want[j])
		}
		if _, err := v.Verify(forged, now); err == nil {
			t.Fatalf("check %d: a forged token verified", i)
		}
	}
}
