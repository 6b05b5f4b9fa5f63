// Package loadreport is the message in which hubs and edges publish their
// load over NATS at a fixed interval, and the loop that publishes it: what
// authdns's load feedback reads to weight its answers.
//
// A Report is JSON on one subject (DefaultSubject, "corral.load"); its
// Addr is the address the origin advertises, which authdns matches to the
// values of its records (the whole value, or its host for A and AAAA).
package loadreport
