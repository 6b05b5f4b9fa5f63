package authdns

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"
)

var writeCorpus = flag.Bool("write-corpus", false, "write the seed corpus of the fuzz targets under testdata/fuzz")

// seed is one packet of the committed seed corpus.
type seed struct {
	name string
	b    []byte
}

// seedPackets are the seeds of FuzzHandle, FuzzParseDiff and FuzzFast: every rule of
// the parser at its edge (names of 255 and 256 bytes, OPT and client
// subnet variants, compression pointers, cut packets, lying counts).
func seedPackets() []seed {
	zone := wireOf("corral.test")
	static := wireOf("static.corral.test")
	opt := func(opts ...[]byte) []byte { return optRR([]byte{0}, 1232, 0, opts...) }
	q := func(name []byte, qtype uint16, ar ...[]byte) []byte { return rawQuery(0, name, qtype, ar...) }
	geo := wireOf("geo.corral.test")
	mq := func(name string, qtype uint16, edit func(*dns.Msg)) []byte { // with a fixed ID
		return mkQuery(name, qtype, func(m *dns.Msg) {
			m.Id = 0x1234
			if edit != nil {
				edit(m)
			}
		})
	}
	plain := mq("static.corral.test", dns.TypeA, nil)
	resp := append([]byte(nil), plain...)
	resp[2] |= 0x80
	return []seed{
		// Header.
		{"empty", nil},
		{"header-11", make([]byte, 11)},
		{"header-only-qd0", make([]byte, 12)},
		{"header-only-qd1", withCounts(make([]byte, 12), 1, 0, 0, 0)},
		{"response", resp},
		{"qd2", withCounts(plain, 2, 0, 0, 0)},
		{"notify", mq("corral.test", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })},
		{"update-qd0", withCounts(rawQuery(uint16(dns.OpcodeUpdate)<<11, zone, dns.TypeSOA), 0, 0, 0, 0)},
		{"rd-cd", mq("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.CheckingDisabled = true })},
		// Questions.
		{"static-a", plain},
		{"mixed-case", mq("StAtIc.CoRrAl.TeSt", dns.TypeA, nil)},
		{"root", q([]byte{0}, dns.TypeNS)},
		{"name-255", q(longName(255, zone), dns.TypeA)},
		{"name-255-wildcard", q(longName(255, wireOf("w.corral.test")), dns.TypeA)},
		{"name-256", q(longName(256, zone), dns.TypeA)},
		{"name-256-wildcard", q(longName(256, wireOf("w.corral.test")), dns.TypeA)},
		{"name-320", q(longName(320, zone), dns.TypeA)},
		{"pointer-question", q([]byte{0xC0, 0x0C}, dns.TypeA)},
		{"pointer-question-192", q(append(append([]byte{0xC0, 0x0C}, make([]byte, 191)...), 0), dns.TypeA)},
		{"pointer-to-header", q([]byte{0xC0, 0x04}, dns.TypeNS)},
		{"pointer-forward", append(q([]byte{0xC0, 0x12}, dns.TypeA), static...)},
		{"pointer-mid-question", q(append([]byte{6, 's', 't', 'a', 't', 'i', 'c'}, 0xC0, 0x0C), dns.TypeA)},
		{"label-0x41", q(append([]byte{0x41}, make([]byte, 66)...), dns.TypeA)},
		{"label-0x81", q(append([]byte{0x81}, make([]byte, 130)...), dns.TypeA)},
		{"cut-after-name", plain[:12+len(static)]},
		{"cut-in-qtype", plain[:12+len(static)+1]},
		{"cut-in-qclass", plain[:12+len(static)+3]},
		{"class-ch", mq("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })},
		{"class-any", mq("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassANY })},
		{"qtype-0", q(static, 0)},
		{"qtype-opt", q(static, dns.TypeOPT)},
		{"any-apex", q(zone, dns.TypeANY)},
		{"axfr", q(zone, dns.TypeAXFR)},
		{"ixfr", q(zone, dns.TypeIXFR)},
		{"cname-chain-9", q(wireOf("hop9-1.corral.test"), dns.TypeA)},
		{"wildcard-tenant", q(wireOf("acme.tenants.corral.test"), dns.TypeA, opt())},
		{"big-txt", q(wireOf("big.corral.test"), dns.TypeTXT)},
		{"big-txt-edns-4096", q(wireOf("big.corral.test"), dns.TypeTXT, optRR([]byte{0}, 4096, 0))},
		{"mx-additional", q(zone, dns.TypeMX, opt())},
		// OPT.
		{"opt-size-0", q(static, dns.TypeA, optRR([]byte{0}, 0, 0))},
		{"opt-size-511", q(wireOf("multi.corral.test"), dns.TypeA, optRR([]byte{0}, 511, 0))},
		{"opt-size-512", q(static, dns.TypeA, optRR([]byte{0}, 512, 0))},
		{"opt-size-65535", q(wireOf("big.corral.test"), dns.TypeTXT, optRR([]byte{0}, 65535, 0))},
		{"opt-do", q(static, dns.TypeA, optRR([]byte{0}, 1232, ednsDO))},
		{"opt-version-1", q(static, dns.TypeA, optRR([]byte{0}, 1232, 1<<16))},
		{"opt-extended-rcode", q(static, dns.TypeA, optRR([]byte{0}, 1232, 0xFF<<24))},
		{"opt-two", q(static, dns.TypeA, opt(), opt())},
		{"opt-owner-zone", q(static, dns.TypeA, optRR(zone, 1232, 0))},
		{"opt-owner-pointer", q(static, dns.TypeA, optRR([]byte{0xC0, 0x0C}, 1232, 0))},
		{"opt-in-answer", append(withCounts(q(static, dns.TypeA), 1, 1, 0, 0), opt()...)},
		{"opt-cut", q(static, dns.TypeA, opt()[:8])},
		{"opt-count-lies", withCounts(q(static, dns.TypeA, opt()), 1, 0, 0, 2)},
		{"opt-cookie", q(static, dns.TypeA, opt(ednsOpt(10, 1, 2, 3, 4, 5, 6, 7, 8)))},
		{"opt-padding", q(static, dns.TypeA, opt(ednsOpt(12, make([]byte, 40)...)))},
		{"opt-keepalive-bad-length", q(static, dns.TypeA, opt(ednsOpt(11, 1)))},
		{"opt-option-overflow", q(static, dns.TypeA, opt(ednsOpt(10, 1, 2)[:5]))},
		// Client subnet.
		{"ecs-v4-24", q(geo, dns.TypeA, opt(ecsOpt(1, 24, 0, 10, 9, 8)))},
		{"ecs-v4-0", q(geo, dns.TypeA, opt(ecsOpt(1, 0, 0)))},
		{"ecs-v4-32", q(geo, dns.TypeA, opt(ecsOpt(1, 32, 0, 172, 16, 0, 1)))},
		{"ecs-v4-33", q(geo, dns.TypeA, opt(ecsOpt(1, 33, 0, 10, 9, 8, 0, 0)))},
		{"ecs-v6-56", q(geo, dns.TypeA, opt(ecsOpt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 1)))},
		{"ecs-v6-128", q(geo, dns.TypeA, opt(ecsOpt(2, 128, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)))},
		{"ecs-family-0", q(geo, dns.TypeA, opt(ecsOpt(0, 0, 0)))},
		{"ecs-family-0-source-8", q(geo, dns.TypeA, opt(ecsOpt(0, 8, 0, 10)))},
		{"ecs-family-0-address", q(geo, dns.TypeA, opt(ecsOpt(0, 0, 0, 10)))},
		{"ecs-family-0-scope", q(geo, dns.TypeA, opt(ecsOpt(0, 0, 8)))},
		{"ecs-family-3", q(geo, dns.TypeA, opt(ecsOpt(3, 8, 0, 10)))},
		{"ecs-scope-24", q(geo, dns.TypeA, opt(ecsOpt(1, 24, 24, 10, 9, 8)))},
		{"ecs-address-long", q(geo, dns.TypeA, opt(ecsOpt(1, 24, 0, 10, 9, 8, 0)))},
		{"ecs-address-short", q(geo, dns.TypeA, opt(ecsOpt(1, 24, 0, 10, 9)))},
		{"ecs-bits-past-source", q(geo, dns.TypeA, opt(ecsOpt(1, 23, 0, 10, 9, 9)))},
		{"ecs-two", q(geo, dns.TypeA, opt(ecsOpt(1, 24, 0, 10, 9, 8), ecsOpt(1, 16, 0, 172, 16)))},
		{"ecs-3-bytes", q(geo, dns.TypeA, opt(ednsOpt(optECS, 0, 1, 24)))},
		{"ecs-badvers", q(geo, dns.TypeA, optRR([]byte{0}, 1232, 1<<16, ecsOpt(1, 24, 0, 10, 9, 8)))},
		// Other records in a query.
		{"answer-bad-rdata", append(withCounts(q(static, dns.TypeA), 1, 1, 0, 0), 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 3, 1, 2, 3)},
		{"answer-pointer-past-end", append(withCounts(q(static, dns.TypeA), 1, 1, 0, 0), 0xC3, 0xFF, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0)},
		{"authority-cut", append(withCounts(q(static, dns.TypeA), 1, 0, 1, 0), 0, 0, 1)},
	}
}

// TestSeedCorpus checks that testdata/fuzz holds every seed of
// seedPackets for each fuzz target; -write-corpus writes them.
func TestSeedCorpus(t *testing.T) {
	for _, target := range []string{"FuzzHandle", "FuzzParseDiff", "FuzzFast"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if *writeCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range seedPackets() {
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.b)
			p := filepath.Join(dir, s.name)
			if *writeCorpus {
				if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(p)
			if err != nil || string(got) != want {
				t.Errorf("%s differs from seedPackets (err %v); run go test -run TestSeedCorpus -write-corpus ./authdns/", p, err)
			}
		}
	}
}
