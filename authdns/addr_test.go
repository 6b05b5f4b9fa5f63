package authdns

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

const addrZone = `
listen: LISTEN
sockets: 2
rrl: {enabled: false}
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - name: where
        type: A
        policy: cidr
        locations: {loop4: [127.0.0.0/8], loop6: ["::1/128"]}
        values: [{value: 10.0.0.4, location: loop4}, {value: 10.0.0.6, location: loop6}, {value: 10.0.0.9, location: "*"}]
`

// TestClientAddressFromSocket checks that the address the server reads
// from each datagram (and TCP connection) is the client's, over IPv4 and
// IPv6: a cidr set answers by it.
func TestClientAddressFromSocket(t *testing.T) {
	tests := []struct {
		name, listen, want string
	}{
		{"ipv4", "127.0.0.1:0", "10.0.0.4"},
		{"ipv6", "[::1]:0", "10.0.0.6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "ipv6" {
				l, err := net.ListenPacket("udp", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				l.Close()
			}
			cfg := decodeConfig(t, strings.Replace(addrZone, "LISTEN", `"`+tc.listen+`"`, 1))
			_, addr := startConfig(t, cfg, Options{})
			for _, network := range []string{"udp", "tcp"} {
				r := ask(t, addr, network, "where.corral.test", dns.TypeA, nil)
				if got := answerData(r); !slices.Equal(got, []string{tc.want}) {
					t.Errorf("%s: answer %v, want %s", network, got, tc.want)
				}
			}
		})
	}
}
