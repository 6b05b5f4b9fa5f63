// Package tlssession keeps the TLS session tickets of a client per server
// address. crypto/tls keys its client session cache by server name, which
// every server behind one DNS name shares, while each server process seals
// its tickets with keys of its own: one entry per name hands each server
// the ticket of the previous one, which it cannot open, and no
// reconnection to another address behind the name resumes. PerAddress
// puts the address in the key, so each server gets back its own ticket.
//
// The client SDK (package client) and the edge's connections to the hubs
// (internal/tlsconf's Client) both use it. It imports nothing of corral.
package tlssession
