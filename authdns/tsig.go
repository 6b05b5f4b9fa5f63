package authdns

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/config"
)

// TSIGKeyConfig is a TSIG key (RFC 8945) that can sign zone transfers. The
// secret is never written in the YAML file: it is read, base64 as BIND's
// and Knot's key files and `dig -y` write it, from an environment variable
// or a file, at start and on every reload.
type TSIGKeyConfig struct {
	// Name is the key's name, a domain name ("xfr.corral.test"); the
	// client signs with the same name.
	Name string `yaml:"name"`
	// Algorithm is hmac-sha256 (default), hmac-sha224, hmac-sha384,
	// hmac-sha512 or hmac-sha1.
	Algorithm string `yaml:"algorithm"`
	// SecretEnv names the environment variable that holds the secret.
	SecretEnv string `yaml:"secret_env"`
	// SecretFile is the path of a file that holds the secret (surrounding
	// white space is ignored). Exactly one of SecretEnv and SecretFile.
	SecretFile string `yaml:"secret_file"`
}

// DefaultTSIGAlgorithm is the algorithm of a key that names none.
const DefaultTSIGAlgorithm = "hmac-sha256"

// tsigAlgorithms maps the configured algorithm names to miekg/dns's.
var tsigAlgorithms = map[string]string{
	"hmac-sha1": dns.HmacSHA1, "hmac-sha224": dns.HmacSHA224, "hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384, "hmac-sha512": dns.HmacSHA512,
}

// tsigFudge is the time error allowed between signer and verifier, the
// RFC's recommended 300 s.
const tsigFudge = 300

// rcodeNotAuth is the response code of a transfer refused for its TSIG
// (RFC 8945 section 5.2).
const rcodeNotAuth = 9

// tsigKey is a loaded key.
type tsigKey struct {
	name   string // canonical, with the final dot
	alg    string // miekg/dns's name, "hmac-sha256."
	secret string // base64, as miekg/dns takes it
}

// loadTSIGKeys reads the secrets of c's keys and returns them all, and the
// keys that AXFRTSIG names (nil when transfers need no key), with every
// problem as a config field error.
func loadTSIGKeys(c *Config) (all, need map[string]*tsigKey, errs []error) {
	bad := func(path, format string, args ...any) {
		errs = append(errs, config.Errorf(path, "authdns: "+format, args...))
	}
	keys := make(map[string]*tsigKey, len(c.TSIGKeys))
	for i, kc := range c.TSIGKeys {
		p := fmt.Sprintf("tsig_keys[%d]", i)
		name := dns.CanonicalName(kc.Name)
		if _, ok := dns.IsDomainName(name); !ok || kc.Name == "" {
			bad(p+".name", "bad key name %q", kc.Name)
			continue
		}
		if _, dup := keys[name]; dup {
			bad(p+".name", "key %s is defined twice", name)
			continue
		}
		algName := strings.ToLower(kc.Algorithm)
		if algName == "" {
			algName = DefaultTSIGAlgorithm
		}
		alg, ok := tsigAlgorithms[algName]
		if !ok {
			bad(p+".algorithm", "unknown algorithm %q (want hmac-sha256, hmac-sha224, hmac-sha384, hmac-sha512 or hmac-sha1)", kc.Algorithm)
			continue
		}
		secret, err := readSecret(kc)
		if err != nil {
			bad(p, "key %s: %v", name, err)
			continue
		}
		keys[name] = &tsigKey{name: name, alg: alg, secret: secret}
	}
	for i, n := range c.AXFRTSIG {
		k, ok := keys[dns.CanonicalName(n)]
		if !ok {
			bad(fmt.Sprintf("axfr_tsig[%d]", i), "unknown TSIG key %q (define it under tsig_keys)", n)
			continue
		}
		if need == nil {
			need = make(map[string]*tsigKey)
		}
		need[k.name] = k
	}
	return keys, need, errs
}

// readSecret reads the base64 secret of kc from its variable or file.
func readSecret(kc TSIGKeyConfig) (string, error) {
	var raw string
	switch {
	case kc.SecretEnv != "" && kc.SecretFile != "":
		return "", errors.New("give secret_env or secret_file, not both")
	case kc.SecretEnv != "":
		v, ok := os.LookupEnv(kc.SecretEnv)
		if !ok {
			return "", fmt.Errorf("the environment variable %s of its secret is not set", kc.SecretEnv)
		}
		raw = v
	case kc.SecretFile != "":
		b, err := os.ReadFile(kc.SecretFile)
		if err != nil {
			return "", fmt.Errorf("reading its secret: %v", err)
		}
		raw = string(b)
	default:
		return "", errors.New("the secret comes from secret_env or secret_file (never from the config file)")
	}
	raw = strings.TrimSpace(raw)
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) == 0 {
		return "", errors.New("the secret is not base64 text (make one with `openssl rand -base64 32`)")
	}
	return raw, nil
}

// tsigSigner signs the messages of one transfer: the first with the
// request's MAC, each next one with the MAC before and the timers only
// (RFC 8945 section 5.3.1).
type tsigSigner struct {
	key        *tsigKey
	prevMAC    string // hex, as miekg/dns keeps it
	timersOnly bool
}

// checkTSIG verifies the TSIG of the transfer request req. With keys
// required (axfr_tsig) it must be signed with one of them; without, a
// signed request is verified against every key of tsig_keys and an
// unsigned one passes. It returns whether the transfer may go on, its
// signer (nil for an unsigned transfer), or the error response to send:
// NOTAUTH without a TSIG, NOTAUTH with TSIG error BADKEY, BADSIG or
// BADTIME otherwise, as Knot answers (RFC 8945 section 5.2), and why.
func checkTSIG(st *state, req []byte, now time.Time) (ok bool, s *tsigSigner, resp []byte, why string) {
	rm := new(dns.Msg)
	err := rm.Unpack(req)
	ts := rm.IsTsig()
	if len(st.xfrKeys) == 0 && (err != nil || ts == nil) {
		return true, nil, nil, ""
	}
	if err != nil {
		return false, nil, notAuth(rm, nil, 0, nil), "unreadable request"
	}
	if ts == nil {
		return false, nil, notAuth(rm, nil, 0, nil), "no TSIG"
	}
	keys := st.xfrKeys
	if len(keys) == 0 {
		keys = st.tsigKeys
	}
	k := keys[dns.CanonicalName(ts.Hdr.Name)]
	if k == nil || !strings.EqualFold(ts.Algorithm, k.alg) {
		return false, nil, notAuth(rm, ts, dns.RcodeBadKey, nil), "unknown key " + ts.Hdr.Name + " " + ts.Algorithm
	}
	switch err := dns.TsigVerify(req, k.secret, "", false); {
	case err == nil:
		return true, &tsigSigner{key: k, prevMAC: ts.MAC}, nil, ""
	case errors.Is(err, dns.ErrTime):
		return false, nil, notAuth(rm, ts, dns.RcodeBadTime, k), fmt.Sprintf("time signed %d is more than %d s from %d", ts.TimeSigned, tsigFudge, now.Unix())
	default:
		return false, nil, notAuth(rm, ts, dns.RcodeBadSig, nil), "bad signature with key " + k.name
	}
}

// notAuth builds the NOTAUTH answer to rm. With ts it carries a TSIG record
// with the error tsigErr, unsigned (BADKEY, BADSIG) or signed with k and
// the server's time (BADTIME, RFC 8945 section 5.2.3).
func notAuth(rm *dns.Msg, ts *dns.TSIG, tsigErr int, k *tsigKey) []byte {
	r := new(dns.Msg)
	r.SetRcode(rm, rcodeNotAuth)
	if ts == nil {
		b, err := r.Pack()
		if err != nil {
			return nil
		}
		return b
	}
	r.SetTsig(ts.Hdr.Name, ts.Algorithm, tsigFudge, int64(ts.TimeSigned))
	t := r.Extra[len(r.Extra)-1].(*dns.TSIG)
	t.Error = uint16(tsigErr)
	secret, mac := "", ""
	if k != nil {
		var other [6]byte
		now := uint64(time.Now().Unix())
		binary.BigEndian.PutUint16(other[:], uint16(now>>32))
		binary.BigEndian.PutUint32(other[2:], uint32(now))
		t.OtherLen, t.OtherData = 6, fmt.Sprintf("%x", other)
		secret, mac = k.secret, ts.MAC
	}
	b, _, err := dns.TsigGenerate(r, secret, mac, false)
	if err != nil {
		return nil
	}
	return b
}

// sign returns msg, a message of the transfer, with its TSIG record.
func (s *tsigSigner) sign(msg []byte) ([]byte, error) {
	m := new(dns.Msg)
	if err := m.Unpack(msg); err != nil {
		return nil, fmt.Errorf("authdns: signing a transfer message: %w", err)
	}
	m.Compress = true
	m.SetTsig(s.key.name, s.key.alg, tsigFudge, time.Now().Unix())
	out, mac, err := dns.TsigGenerate(m, s.key.secret, s.prevMAC, s.timersOnly)
	if err != nil {
		return nil, fmt.Errorf("authdns: signing a transfer message: %w", err)
	}
	s.prevMAC, s.timersOnly = mac, true
	return out, nil
}

// writeMsg writes one length-prefixed message to c.
func writeMsg(c net.Conn, msg []byte, idle time.Duration) error {
	if len(msg) > 65535 {
		return errors.New("authdns: message over 65535 bytes")
	}
	b := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(b, uint16(len(msg)))
	copy(b[2:], msg)
	_ = c.SetWriteDeadline(time.Now().Add(idle))
	_, err := c.Write(b)
	return err
}
