package tlsconf

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/corralhq/corral/internal/config"
)

// Config is the TLS part of a server's configuration (YAML section "tls"
// of the hub and the edge). The zero value serves plaintext: TLS is on
// when CertFile or KeyFile is set. Zero fields take their defaults.
type Config struct {
	// CertFile is the PEM certificate chain, leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, asks every client for a certificate signed
	// by one of the PEM certificates in this file (mutual TLS) and refuses
	// a client without one. Empty: clients are not asked.
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is the oldest TLS version accepted: "1.3" (default) or
	// "1.2".
	MinVersion string `yaml:"min_version"`
	// ReloadInterval is how often the files are checked for a change (size
	// or modification time); a changed, valid pair is served to the next
	// handshakes, an invalid one is logged and counted and the old pair
	// kept. Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// TicketKeyRotation is how often a new session ticket key is made;
	// new tickets are sealed with the newest key. Default 12h (Caddy's
	// default; Go's own automatic keys rotate daily).
	TicketKeyRotation time.Duration `yaml:"ticket_key_rotation"`
	// TicketKeys is how many keys are kept to open tickets: a ticket
	// resumes for up to TicketKeys-1 rotations after it was issued.
	// Default 4 (with 12h: tickets resume for 36 to 48 hours).
	TicketKeys int `yaml:"ticket_keys"`
}

// The defaults of the zero fields.
const (
	DefaultReloadInterval    = 5 * time.Second
	DefaultTicketKeyRotation = 12 * time.Hour
	DefaultTicketKeys        = 4
)

// maxTicketKeys bounds TicketKeys: every key is tried on a ticket that the
// first does not open.
const maxTicketKeys = 64

// Enabled reports whether the configuration asks for TLS.
func (c Config) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.ClientCAFile != "" }

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.MinVersion = cmp.Or(c.MinVersion, "1.3")
	c.ReloadInterval = cmp.Or(c.ReloadInterval, DefaultReloadInterval)
	c.TicketKeyRotation = cmp.Or(c.TicketKeyRotation, DefaultTicketKeyRotation)
	c.TicketKeys = cmp.Or(c.TicketKeys, DefaultTicketKeys)
	return c
}

// Validate checks the fields without reading the files (New reads them);
// the errors name the key. A configuration that is not Enabled is valid.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	if c.CertFile == "" {
		return config.Errorf("cert_file", "tlsconf: must be set with key_file")
	}
	if c.KeyFile == "" {
		return config.Errorf("key_file", "tlsconf: must be set with cert_file")
	}
	if _, err := minVersion(c.MinVersion); err != nil {
		return config.Field("min_version", err)
	}
	if c.ReloadInterval < 0 {
		return config.Errorf("reload_interval", "tlsconf: must not be negative, got %v", c.ReloadInterval)
	}
	if c.TicketKeyRotation < 0 {
		return config.Errorf("ticket_key_rotation", "tlsconf: must not be negative, got %v", c.TicketKeyRotation)
	}
	if c.TicketKeys < 0 || c.TicketKeys > maxTicketKeys {
		return config.Errorf("ticket_keys", "tlsconf: must be 1 to %d, got %d", maxTicketKeys, c.TicketKeys)
	}
	return nil
}

// minVersion maps the text of min_version to the TLS version.
func minVersion(s string) (uint16, error) {
	switch s {
	case "", "1.3":
		return tls.VersionTLS13, nil
	case "1.2":
		return tls.VersionTLS12, nil
	}
	return 0, fmt.Errorf("tlsconf: %q is not a TLS version this server accepts as the oldest (\"1.2\" or \"1.3\")", s)
}
