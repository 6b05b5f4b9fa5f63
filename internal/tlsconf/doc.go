// Package tlsconf terminates TLS for corral's servers (the hub, and the
// edge), and is the client side of the edge's connections to the hubs. A
// Server is a certificate and key read from PEM files and reloaded when the
// files change, TLS 1.3 by default, session resumption with tickets whose
// keys rotate, optional client certificates, and Prometheus metrics of
// the handshakes, reloads and the certificate's expiry.
//
// New checks a Config and returns a Server (no file read); Load reads the
// files; ServerConfig gives the *tls.Config of one listener (with its ALPN
// protocols), for tls.NewListener or grpc's credentials.NewTLS; Run checks
// the files and rotates the ticket keys until its context ends. Each
// handshake takes the Server's current certificate and keys through
// GetConfigForClient, so a reload or a rotation applies to the next
// handshakes and never to an open connection, and a copy of the
// configuration (grpc clones it) stays current.
//
// A changed pair that does not load (a key that does not match, a file
// half written) is logged and counted, and the previous certificate is
// still served; it is read again as soon as one of its files changes
// again. After a rotation the previous ticket_keys-1 keys still open
// tickets, so a client resumes across rotations.
//
// A Client is the other side, for the edge's Relay streams to the hubs:
// the CAs that verify a server (checked against the files loaded now, so
// a changed ca_file needs no restart), the server name, an optional client
// certificate (mutual TLS), reloaded like a Server's files, and a session
// cache for resumption. NewClient, Load, Run as above; Config gives the
// *tls.Config of connections to one server (address and name; session
// cache entries are per address).
//
// The package imports nothing of corral but internal/config (for the key
// paths of its errors) and internal/tlssession (the per-address session
// cache).
package tlsconf
