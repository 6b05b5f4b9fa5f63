package hub

import (
	"crypto/tls"
	"time"

	"github.com/corralhq/corral/internal/tlsconf"
)

// TLSConfig is the hub's TLS (YAML section "tls"), terminated by
// internal/tlsconf. The zero value serves plaintext; with CertFile and
// KeyFile set, the WebSocket and publish listener serves HTTPS and wss,
// and the gRPC listener grpcs, both from the same certificate and ticket
// keys. Zero fields take their defaults.
type TLSConfig struct {
	// CertFile is the PEM certificate chain, leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, requires every client to present a
	// certificate of one of its PEM CAs (mutual TLS).
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is the oldest TLS version accepted, "1.3" (default) or
	// "1.2".
	MinVersion string `yaml:"min_version"`
	// ReloadInterval is how often the files are checked for a change; a
	// valid new pair is served to new connections (open sessions keep
	// theirs), an invalid one is logged and the old one kept. Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// TicketKeyRotation is how often a new session ticket key is made.
	// Default 12h.
	TicketKeyRotation time.Duration `yaml:"ticket_key_rotation"`
	// TicketKeys is how many keys open tickets (a ticket resumes for up to
	// TicketKeys-1 rotations). Default 4.
	TicketKeys int `yaml:"ticket_keys"`
}

// tlsconf returns c in tlsconf's terms.
func (c TLSConfig) tlsconf() tlsconf.Config {
	return tlsconf.Config{
		CertFile: c.CertFile, KeyFile: c.KeyFile, ClientCAFile: c.ClientCAFile, MinVersion: c.MinVersion,
		ReloadInterval: c.ReloadInterval, TicketKeyRotation: c.TicketKeyRotation, TicketKeys: c.TicketKeys,
	}
}

// wsTLS is the TLS configuration of the WebSocket and HTTP listener, nil
// without TLS.
func (h *Hub) wsTLS() *tls.Config {
	if h.tls == nil {
		return nil
	}
	return h.tls.ServerConfig("http/1.1")
}
