package auth

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// The claims of every token are decoded on every check, and encoding/json
// (reflection over Claims and its embedded jwt.RegisteredClaims, a
// validity pass before the decode, json.Number for each NumericDate) was
// the largest part of a hub's session set-up outside the kernel: 8 to
// 11 % of the CPU profile of a dial storm (issue 10, item 13).
// decodeClaims therefore reads
// the plain form every issuer writes (an object of the known claims, each
// once, strings of ASCII with simple escapes, integer dates) in one pass
// and falls back to encoding/json for anything else: an unknown or
// differently cased key, a repeated key, null, a non-ASCII byte or a
// surrogate escape in a string, a fractional or exponent date, anything
// malformed. The fast path decides nothing that encoding/json would decide
// otherwise: where it accepts, the result equals json.Unmarshal's
// (FuzzDecodeClaims checks that on every input it accepts), and every
// claim check runs after either path the same. Measured (callgrind,
// 2026-12-02): a check of bench/hub/run.sh's HS256 token 41,000 -> 21,700
// instructions and 27 -> 16 allocations (BenchmarkVerify); a whole
// session set-up 141,000 -> 126,000 user-mode instructions
// (bench/hub/run.sh instructions, GOGC=off).

// decodeClaims decodes seg, a token's claims segment (base64url, unpadded
// JSON), into c, a zero Claims, through sc's buffer (the decoded bytes are
// not kept: both paths copy the strings out).
func decodeClaims(seg string, c *Claims, sc *scratch) error {
	n := len(seg)
	sc.buf = slices.Grow(sc.buf[:0], n+base64.RawURLEncoding.DecodedLen(n))
	src := append(sc.buf[:0], seg...)
	b, err := base64.RawURLEncoding.AppendDecode(sc.buf[n:n], src)
	if err != nil {
		return err
	}
	return unmarshalClaims(b, c)
}

// unmarshalClaims is json.Unmarshal(b, c) for c a zero Claims, through
// the fast path where it applies.
func unmarshalClaims(b []byte, c *Claims) error {
	if fastClaims(b, c) {
		return nil
	}
	*c = Claims{}
	return json.Unmarshal(b, c)
}

// The claims the fast path knows, as bits of a set (each at most once).
const (
	seenIss = 1 << iota
	seenSub
	seenAud
	seenExp
	seenNbf
	seenIat
	seenJti
	seenTenant
	seenChannels
	seenPublish
	seenMaxPriority
)

// fastClaims decodes b into c when b is in the plain form, and reports
// whether it did; c is then what json.Unmarshal would have made of b. On
// false c may hold part of b.
func fastClaims(b []byte, c *Claims) bool {
	p := claimsParser{b: b}
	p.space()
	if !p.byte('{') {
		return false
	}
	p.space()
	seen := 0
	if !p.byte('}') {
		for {
			key, ok := p.str()
			if !ok {
				return false
			}
			p.space()
			if !p.byte(':') {
				return false
			}
			p.space()
			bit, ok := p.member(key, c)
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			p.space()
			if p.byte(',') {
				p.space()
				continue
			}
			if p.byte('}') {
				break
			}
			return false
		}
	}
	p.space()
	return p.i == len(p.b)
}

// claimsParser reads the plain form of a claims object.
type claimsParser struct {
	b []byte
	i int
}

// member decodes the value of the claim key into c and returns its bit;
// false for an unknown key or a value outside the plain form.
func (p *claimsParser) member(key string, c *Claims) (int, bool) {
	var ok bool
	switch key {
	case "iss":
		c.Issuer, ok = p.str()
		return seenIss, ok
	case "sub":
		c.Subject, ok = p.str()
		return seenSub, ok
	case "jti":
		c.ID, ok = p.str()
		return seenJti, ok
	case "tenant":
		c.Tenant, ok = p.str()
		return seenTenant, ok
	case "aud":
		// A string or an array of strings: the plain form is checked
		// here, the value decoded by golang-jwt's own ClaimStrings.
		from := p.i
		if p.peek('[') {
			_, ok = p.strs()
		} else {
			_, ok = p.str()
		}
		return seenAud, ok && c.Audience.UnmarshalJSON(p.b[from:p.i]) == nil
	case "exp":
		c.ExpiresAt, ok = p.date()
		return seenExp, ok
	case "nbf":
		c.NotBefore, ok = p.date()
		return seenNbf, ok
	case "iat":
		c.IssuedAt, ok = p.date()
		return seenIat, ok
	case "channels":
		c.Channels, ok = p.strs()
		return seenChannels, ok
	case "publish":
		c.Publish, ok = p.strs()
		return seenPublish, ok
	case "max_priority":
		var n int
		if n, ok = p.smallInt(); ok {
			c.MaxPriority = &n
		}
		return seenMaxPriority, ok
	}
	return 0, false
}

func (p *claimsParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *claimsParser) peek(c byte) bool { return p.i < len(p.b) && p.b[p.i] == c }

// byte consumes c if it is next.
func (p *claimsParser) byte(c byte) bool {
	if p.peek(c) {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII with the escapes \" \\ \/ \b \f
// \n \r \t and \uXXXX outside the surrogates.
func (p *claimsParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20 || c >= utf8.RuneSelf:
			return "", false
		default:
			p.i++
		}
	}
	return "", false
}

// escaped finishes a string that started at start and has an escape at
// p.i.
func (p *claimsParser) escaped(start int) (string, bool) {
	out := append(make([]byte, 0, p.i-start+16), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c < 0x20 || c >= utf8.RuneSelf:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+4 > len(p.b) {
				return "", false
			}
			var r rune
			for _, h := range p.b[p.i : p.i+4] {
				v, ok := hexValue(h)
				if !ok {
					return "", false
				}
				r = r<<4 | v
			}
			if 0xD800 <= r && r <= 0xDFFF {
				return "", false // a surrogate: encoding/json pairs them or writes U+FFFD
			}
			out = utf8.AppendRune(out, r)
			p.i += 4
		default:
			return "", false
		}
	}
	return "", false
}

// hexValue is the value of the hex digit c.
func hexValue(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// strs reads an array of strings; [] is an empty, non-nil slice, as
// encoding/json makes it.
func (p *claimsParser) strs() ([]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	p.space()
	out := []string{}
	if p.byte(']') {
		return out, true
	}
	for {
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		p.space()
		if p.byte(',') {
			p.space()
			continue
		}
		return out, p.byte(']')
	}
}

// digits reads an optional minus and 1 to max digits without a leading
// zero, and returns them.
func (p *claimsParser) digits(max int) ([]byte, bool) {
	start := p.i
	p.byte('-')
	d := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - d
	if n == 0 || n > max || n > 1 && p.b[d] == '0' {
		return nil, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return nil, false // a fraction or an exponent: encoding/json's way
		}
	}
	return p.b[start:p.i], true
}

// date reads an integer NumericDate of at most 15 digits: exact as a
// float64, so the time golang-jwt's NumericDate.UnmarshalJSON makes of it
// (seconds through a float64, then NewNumericDate, which truncates to
// jwt.TimePrecision).
func (p *claimsParser) date() (*jwt.NumericDate, bool) {
	d, ok := p.digits(15)
	if !ok {
		return nil, false
	}
	n, err := strconv.ParseInt(string(d), 10, 64)
	if err != nil {
		return nil, false
	}
	return jwt.NewNumericDate(time.Unix(n, 0)), true
}

// smallInt reads an integer of at most 9 digits (an int on every
// platform).
func (p *claimsParser) smallInt() (int, bool) {
	d, ok := p.digits(9)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(d))
	return n, err == nil
}
