package edge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/health"
)

// lookup resolves the origin name: A and AAAA at the configured server
// (UDP, TCP when truncated), or the system resolver. It returns the
// addresses in answer order (A before AAAA) at the configured port and the
// smallest TTL of the records used.
func (s *Origins) lookup(ctx context.Context) ([]netip.AddrPort, time.Duration, error) {
	port := uint16(s.cfg.Port)
	if s.server == "" {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", s.cfg.Name)
		if err != nil {
			return nil, 0, fmt.Errorf("edge: resolving %s: %w", s.cfg.Name, err)
		}
		out := make([]netip.AddrPort, 0, len(ips))
		for _, ip := range ips {
			out = append(out, netip.AddrPortFrom(ip.Unmap(), port))
		}
		return out, DefaultSystemTTL, nil
	}
	type result struct {
		addrs []netip.Addr
		ttl   uint32
		err   error
	}
	var res [2]result
	var wg sync.WaitGroup
	for i, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		wg.Go(func() {
			res[i].addrs, res[i].ttl, res[i].err = s.query(ctx, qtype)
		})
	}
	wg.Wait()
	var out []netip.AddrPort
	ttl := uint32(0)
	have := false
	var errs []error
	for _, r := range res {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		if len(r.addrs) == 0 {
			continue
		}
		if !have || r.ttl < ttl {
			ttl = r.ttl
		}
		have = true
		for _, a := range r.addrs {
			out = append(out, netip.AddrPortFrom(a, port))
		}
	}
	if len(errs) > 0 {
		// A query that failed (a timeout, SERVFAIL) makes the whole
		// resolution fail: applying the other family alone would drop
		// every origin of the failed one on a transient error. A server
		// without records of a family answers NOERROR without them.
		return nil, 0, errors.Join(errs...)
	}
	if !have {
		return nil, 0, fmt.Errorf("edge: %s has no A or AAAA record at %s", s.cfg.Name, s.server)
	}
	return out, time.Duration(ttl) * time.Second, nil
}

// query asks the server one question. A name that exists without records
// of qtype answers no address and no error.
func (s *Origins) query(ctx context.Context, qtype uint16) ([]netip.Addr, uint32, error) {
	m := new(dns.Msg)
	m.SetQuestion(s.fqdn, qtype)
	m.SetEdns0(1232, false)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: s.cfg.QueryTimeout}
	r, _, err := c.ExchangeContext(ctx, m, s.server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, s.server)
	}
	name := dns.TypeToString[qtype]
	if err != nil {
		return nil, 0, fmt.Errorf("edge: resolving %s %s at %s: %w", s.cfg.Name, name, s.server, err)
	}
	switch r.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return nil, 0, fmt.Errorf("edge: resolving %s at %s: the name does not exist (NXDOMAIN)", s.cfg.Name, s.server)
	default:
		return nil, 0, fmt.Errorf("edge: resolving %s %s at %s: %s", s.cfg.Name, name, s.server, dns.RcodeToString[r.Rcode])
	}
	var out []netip.Addr
	var ttl uint32
	seen := false
	bound := func(t uint32) {
		if !seen || t < ttl {
			ttl, seen = t, true
		}
	}
	for _, rr := range r.Answer {
		var ip netip.Addr
		switch v := rr.(type) {
		case *dns.A:
			if qtype == dns.TypeA {
				ip, _ = netip.AddrFromSlice(v.A.To4())
			}
		case *dns.AAAA:
			if qtype == dns.TypeAAAA {
				ip, _ = netip.AddrFromSlice(v.AAAA.To16())
			}
		case *dns.CNAME:
			bound(v.Hdr.Ttl) // a chain's TTL bounds the answer's too
		}
		if !ip.IsValid() {
			continue
		}
		bound(rr.Header().Ttl)
		out = append(out, ip)
	}
	return out, ttl, nil
}

// originCheckName is the health check name of an origin address: health
// allows letters, digits, '.', '_' and '-', so the IPv6 colons become '_'
// and the port follows a '-' (which no IP literal holds).
func originCheckName(ap netip.AddrPort) string {
	return "origin-" + strings.ReplaceAll(ap.Addr().String(), ":", "_") + "-" + strconv.Itoa(int(ap.Port()))
}

// originHealthChecks builds the health configuration of the addresses.
func originHealthChecks(c OriginHealthConfig, addrs []string) (health.Config, error) {
	var cfg health.Config
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return health.Config{}, fmt.Errorf("edge: origin %q: %w", a, err)
		}
		cfg.Checks = append(cfg.Checks, health.CheckConfig{
			Name: originCheckName(ap), Kind: c.Kind, Address: a, Service: c.Service, TLS: c.TLS,
			Interval: c.Interval, Timeout: c.Timeout,
			FailureThreshold: c.FailureThreshold, SuccessThreshold: c.SuccessThreshold,
		})
	}
	if err := cfg.Validate(); err != nil {
		return health.Config{}, err
	}
	return cfg, nil
}
