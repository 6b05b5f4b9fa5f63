// Package dnslib holds the measurement behind authdns's choice of DNS library
// (authdns/README.md, "DNS library"): miekg/dns v1 against
// codeberg.org/miekg/dns v0.6.0, unpack and pack in process, and each
// library's server against corral's own query path over loopback UDP. It is
// a separate module so that corral itself does not depend on the second
// library; run it with
//
//	cd bench/dnslib && go test -run X -bench Lib -benchmem -count 5
//	cd bench/dnslib && go test -count=1 -run TestLibServed -v
package dnslib
