package tlssession_test

import (
	"crypto/tls"
	"fmt"

	"github.com/corralhq/corral/internal/tlssession"
)

// Each connection's configuration takes the view of the address it dials.
func ExamplePerAddress() {
	cache := tlssession.NewCache(0) // one per client process
	for _, addr := range []string{"127.0.0.1:7443", "127.0.0.2:7443"} {
		cfg := &tls.Config{ServerName: "hubs.corral.test", ClientSessionCache: tlssession.PerAddress(cache, addr)}
		fmt.Println(addr, cfg.ServerName)
	}
	// Output:
	// 127.0.0.1:7443 hubs.corral.test
	// 127.0.0.2:7443 hubs.corral.test
}
