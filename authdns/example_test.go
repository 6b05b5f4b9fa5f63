package authdns_test

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/authdns"
)

// A server embedded in process: a zone with a multivalue record of 10
// addresses, on a free loopback port.
func Example() {
	yaml := `
listen: 127.0.0.1:0
zones:
  - origin: example.test
    ns: [ns1.example.test]
    records:
      - name: api
        type: A
        policy: multivalue
        values: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5, 10.0.0.6, 10.0.0.7, 10.0.0.8, 10.0.0.9, 10.0.0.10]
`
	cfg, err := authdns.ParseConfig("example.yaml", []byte(yaml))
	if err != nil {
		panic(err)
	}
	srv, err := authdns.New(cfg, authdns.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	<-srv.Started()
	defer func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()

	m := new(dns.Msg)
	m.SetQuestion("api.example.test.", dns.TypeA)
	r, err := dns.Exchange(m, srv.Addr().String())
	if err != nil {
		panic(err)
	}
	fmt.Println(dns.RcodeToString[r.Rcode], len(r.Answer), "addresses, authoritative:", r.Authoritative)
	// Output: NOERROR 8 addresses, authoritative: true
}
