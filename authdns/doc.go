// Package authdns is corral's authoritative DNS server: zones from YAML,
// record sets with Route 53's routing policies (simple, weighted,
// multivalue, failover) and corral's own (weighted-subset, shuffle-sharded
// hands, cidr), answers that follow active health checks.
//
// A Server has the shape of every corral server: build a Config (or read
// one with LoadConfig), check it with Validate, build the server with New
// (no I/O), serve with Run and stop with Shutdown. Reload swaps in new
// zones and checks while serving; Watch reloads on file changes and on a
// signal.
//
// The query path is written for speed: queries are parsed and answers
// written directly in wire format from records packed when the zone is
// loaded (by github.com/miekg/dns, which the query path does not call),
// several UDP sockets share the port with SO_REUSEPORT (one per
// core by default), and on Linux each socket moves datagrams in batches
// with recvmmsg and sendmmsg. The choice of answer records is the pure
// function of package answer, which the simulator shares.
//
// Protocol behaviour: UDP and TCP on the same port; EDNS0 with a 1232-byte
// buffer by default; answers that do not fit are sent empty with TC set;
// NXDOMAIN and NODATA carry the zone's SOA in the authority section;
// names outside the zones get REFUSED, unknown opcodes NOTIMP, EDNS
// versions above 0 BADVERS, malformed questions FORMERR; packets whose
// header cannot be read (and responses) get no answer at all; ANY gets one
// RRset (RFC 8482); NS, MX and SRV answers carry the addresses of their
// targets in the additional section when they fit; CNAME loops are refused
// at load; AXFR is refused unless the client's address is allowed and,
// when keys are required, the request is signed with TSIG (RFC 8945); UDP
// responses are rate limited per /24 and /64 with slip, with BIND's and
// NSD's buckets; a panic while answering one packet is recovered and
// answered SERVFAIL.
package authdns
