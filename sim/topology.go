package sim

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/pick"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/shard"
)

// popShares returns the share of devices of each PoP.
func popShares(g scenario.Geography) []float64 {
	s := make([]float64, g.PoPs)
	if g.Distribution == "explicit" {
		copy(s, g.Shares)
		return s
	}
	sum := 0.0
	for i := range s {
		s[i] = 1 / math.Pow(float64(i+1), g.ZipfExponent)
		sum += s[i]
	}
	for i := range s {
		s[i] /= sum
	}
	return s
}

// splitInto divides n over weights (which add up to 1) into out, exactly:
// out sums to n. Each part is floor(n*cum+u)-floor(n*prevcum+u), a
// systematic rounding whose offset u in [0, 1) makes the rounding unbiased
// over many calls.
func splitInto(out []int64, n int64, weights []float64, u float64) {
	cum := 0.0
	var done int64
	for i, w := range weights {
		cum += w
		hi := int64(math.Floor(float64(n)*cum + u))
		if i == len(weights)-1 || hi > n {
			hi = n
		}
		if hi < done {
			hi = done
		}
		out[i] = hi - done
		done = hi
	}
}

// resolver is a recursive resolver shared by a group of edge hosts of one
// PoP. It caches one answer per tenant label (one in all unless the DNS
// policy is shuffle) for the TTL.
type resolver struct {
	pop     int
	answers [][]int // by tenant (or [0]), origin indices
	expiry  []int   // step at which each cached answer expires
}

// dnsModel evaluates the DNS policy with the real answer selection.
type dnsModel struct {
	set        *answer.Set
	perTenant  bool
	tenantKeys []string
	ttlSteps   int
	resolvers  []resolver
	byPoP      [][]int // resolver indices of each PoP
	scratch    []int
	rng        *rand.PCG
	dealer     *shard.Dealer
	// classes are the resolvers' classes of resolver-aware answers, nil
	// when dns.resolvers is off; audience their classes by audience, nil
	// unless dns.resolvers.audience is on in a run with feedback.
	classes  *resolverClasses
	audience *audienceClasses
}

// healthView is the DNS health view: the origins the health checks believe
// are up, by origin index. Each DNS record answers by the probe of its
// origin, resolved when the record set is built.
type healthView struct {
	up []bool
}

// originProbe is the health of one origin in a healthView.
type originProbe struct {
	h *healthView
	i int
}

func (p *originProbe) Healthy() bool { return p.h.up[p.i] }

var _ answer.Probe = (*originProbe)(nil)

func newDNS(sc *scenario.Scenario, origins []*origin, rng *rand.PCG, steps int) (*dnsModel, *healthView, error) {
	pol, err := answer.ParsePolicy(sc.DNS.Policy)
	if err != nil {
		return nil, nil, fmt.Errorf("sim: %w", err)
	}
	hv := &healthView{up: make([]bool, len(origins))}
	recs := make([]answer.Record, len(origins))
	for i, o := range origins {
		hv.up[i] = true
		recs[i] = answer.Record{Health: &originProbe{hv, i}}
		// The scenario's fields go to the policies that read them.
		if pol.Uses(answer.FieldWeight) {
			recs[i].Weight = uint32(o.weight)
		}
		if pol.Uses(answer.FieldSecondary) {
			recs[i].Secondary = o.secondary
		}
	}
	cfg := answer.Config{Policy: pol, Records: recs}
	if pol.Uses(answer.FieldN) {
		cfg.N = sc.DNS.MaxAnswers
	}
	if sc.DNS.Resolvers.Enabled {
		if pol.Uses(answer.FieldBigSubset) {
			cfg.BigSubset = sc.DNS.BigWeightedSubset
		}
		if pol.Uses(answer.FieldBigN) && (cfg.BigSubset || !pol.Uses(answer.FieldBigSubset)) {
			cfg.BigN = sc.DNS.BigN
			cfg.BigLeaveOut = sc.DNS.Resolvers.Audience && sc.DNS.Feedback.Enabled // as authdns: only sets that learn
		}
	}
	d := &dnsModel{rng: rng}
	if pol.Uses(answer.FieldDealer) {
		secret := make([]byte, shard.SecretSize)
		binary.LittleEndian.PutUint64(secret, sc.Seed)
		binary.LittleEndian.PutUint64(secret[8:], sc.Seed^0x9e3779b97f4a7c15)
		dealer, err := shard.NewDealer(shard.DealerConfig{Secret: secret, Workers: len(origins), HandSize: sc.DNS.HandSize, Spill: sc.DNS.Spill})
		if err != nil {
			return nil, nil, fmt.Errorf("sim: dns: %w", err)
		}
		cfg.Dealer = dealer
		d.dealer = dealer
		d.perTenant = true
	}
	set, err := answer.NewSet(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("sim: dns: %w", err)
	}
	d.set = set
	d.scratch = make([]int, 0, len(origins))
	d.ttlSteps = max(1, stepsOf(answerTTL(sc, pol), sc.Step))
	tenants := 1
	if d.perTenant {
		tenants = sc.Population.Tenants
		d.tenantKeys = make([]string, tenants)
		for t := range tenants {
			d.tenantKeys[t] = tenantName(t)
		}
	}
	g := sc.Geography
	perPoP := (g.HostsPerPoP + g.HostsPerResolver - 1) / g.HostsPerResolver
	r := rand.New(rng)
	d.byPoP = make([][]int, g.PoPs)
	for k := range g.PoPs {
		for range perPoP {
			res := resolver{pop: k, answers: make([][]int, tenants), expiry: make([]int, tenants)}
			for t := range tenants {
				// Resolvers took their current answers at different
				// moments before the run: the first expiry is uniform
				// over the TTL.
				res.expiry[t] = r.IntN(d.ttlSteps)
				res.answers[t] = d.query(t, answer.ClassSmall)
			}
			d.byPoP[k] = append(d.byPoP[k], len(d.resolvers))
			d.resolvers = append(d.resolvers, res)
		}
	}
	if d.classes = newResolverClasses(sc, len(d.resolvers), d.ttlSteps); d.classes != nil {
		// The answers held at the start were taken before the run, by
		// the classes authdns had then: those of big resolvers are
		// taken again as big (after every other draw, so that a run
		// in which no resolver is big draws as one without classes).
		held, err := d.classes.warm(d.resolvers, d.ttlSteps)
		if err != nil {
			return nil, nil, err
		}
		if d.audience = newAudience(sc, len(d.resolvers), len(origins)); d.audience != nil && sc.Population.SessionAge > 0 {
			every := max(1, stepsOf(sc.DNS.Feedback.Interval, sc.Step))
			byAudience, err := d.audience.warm(d, renewals(sc, d), every, sc.Step, rand.NewPCG(sc.Seed, 0xa0d1e))
			if err != nil {
				return nil, nil, err
			}
			for i, c := range byAudience {
				held[i][0] = max(held[i][0], c)
			}
		}
		for i, cs := range held {
			for t, c := range cs {
				if c != answer.ClassSmall {
					d.resolvers[i].answers[t] = d.query(t, c)
				}
			}
		}
		d.classes.counting = true
		if d.audience != nil {
			d.audience.counting, d.audience.peakAt = true, -1
			d.audience.peak = 0
		}
	}
	return d, hv, nil
}

// tenantName is the label of tenant t in shuffle-sharded queries.
func tenantName(t int) string { return fmt.Sprintf("tenant-%d", t) }

// query asks the set for tenant's name on behalf of a resolver of class
// c and returns the answer.
func (d *dnsModel) query(tenant int, c answer.Class) []int {
	q := answer.Query{Class: c}
	if d.perTenant {
		q.Key = d.tenantKeys[tenant]
	}
	got, _ := d.set.Select(d.scratch, q, d.rng)
	return append([]int(nil), got...)
}

// refresh re-queries every cached answer that expired at step now and
// reports whether any did.
func (d *dnsModel) refresh(now int) bool {
	changed := false
	if d.classes != nil {
		d.classes.advance(now)
	}
	for i := range d.resolvers {
		r := &d.resolvers[i]
		for t := range r.expiry {
			if r.expiry[t] <= now {
				c := answer.ClassSmall
				if d.classes != nil {
					c = max(d.classes.query(i), d.audience.of(i))
				}
				r.answers[t] = d.query(t, c)
				if d.classes != nil {
					d.classes.answered(c, len(r.answers[t]))
				}
				r.expiry[t] = now + d.ttlSteps
				changed = true
			}
		}
	}
	return changed
}

// route is where the attempts of one (PoP, tenant) go: origin indices and
// the share of attempts each receives.
type route struct {
	origin []int
	share  []float64
}

// loadFunc writes into dst the loads the edge hosts of PoP k see on the
// origins of ans (what p2c compares).
type loadFunc func(dst []float64, k int, ans []int)

// p2cChunks is how many parts a step's attempts of one resolver are cut
// into for p2c: after each part the loads the edge hosts compare include
// the streams they just sent, so loads move within a step as each pick
// moves them at a real edge host.
const p2cChunks = 8

// pickShares adds to acc the share of attempts an edge host sends to each
// address of ans, scaled by w. For p2c, loads are the loads the hosts see
// on ans (in answer order, modified in place) and demand the attempts the
// hosts send in the step, over which the loads move.
func pickShares(acc []float64, ans []int, pick string, w float64, loads []float64, demand float64) {
	m := len(ans)
	if m == 0 {
		return
	}
	var buf [64]float64
	sh := buf[:0]
	if m > len(buf) {
		sh = make([]float64, m)
	}
	sh = sh[:m]
	switch pick {
	case "first":
		acc[ans[0]] += w
	case "random":
		for _, o := range ans {
			acc[o] += w / float64(m)
		}
	default: // p2c: two distinct random addresses, the less loaded wins.
		if demand <= 0 {
			pick2Shares(sh, loads)
			for j, o := range ans {
				acc[o] += w * sh[j]
			}
			return
		}
		part := demand / p2cChunks
		for range p2cChunks {
			pick2Shares(sh, loads)
			for j, o := range ans {
				acc[o] += w * sh[j] / p2cChunks
				loads[j] += part * sh[j]
			}
		}
	}
}

// pick2Shares is pick.TwoChoiceShares: the exact probabilities of the
// edge's draw.
func pick2Shares(dst, loads []float64) { pick.TwoChoiceShares(dst, loads) }

// routeCount is the number of routes: one per PoP, or per PoP and tenant
// when answers are per tenant.
func (d *dnsModel) routeCount() int {
	if d.perTenant {
		return len(d.byPoP) * len(d.tenantKeys)
	}
	return len(d.byPoP)
}

// routes computes the route of every (PoP, tenant) from the cached
// answers; demand is the step's attempts of each route.
func (d *dnsModel) routes(dst []route, pick string, load loadFunc, demand []float64, nOrigins int) []route {
	tenants := 1
	if d.perTenant {
		tenants = len(d.tenantKeys)
	}
	need := len(d.byPoP) * tenants
	if cap(dst) < need {
		dst = make([]route, need)
	}
	dst = dst[:need]
	acc := make([]float64, nOrigins)
	lbuf := make([]float64, nOrigins)
	for k, rs := range d.byPoP {
		for t := range tenants {
			clear(acc)
			w := 1 / float64(len(rs))
			ri := k*tenants + t
			for _, r := range rs {
				ans := d.resolvers[r].answers[t]
				loads := lbuf[:len(ans)]
				if pick == "p2c" {
					load(loads, k, ans)
				}
				pickShares(acc, ans, pick, w, loads, demand[ri])
			}
			rt := &dst[ri]
			rt.origin, rt.share = rt.origin[:0], rt.share[:0]
			for o, s := range acc {
				if s > 0 {
					rt.origin = append(rt.origin, o)
					rt.share = append(rt.share, s)
				}
			}
		}
	}
	return dst
}

// retryRoute is where the edge hosts of PoP k (and tenant t) send again
// the streams origin from refused: each resolver's hosts, in proportion to
// what they sent to from, pick among the other addresses of their answer
// (first: the address after from in the answer). none is the share of
// the streams whose hosts have no other address.
func (d *dnsModel) retryRoute(k, t, from int, pick string, load loadFunc) (origins []int, shares []float64, none float64) {
	if !d.perTenant {
		t = 0
	}
	acc := map[int]float64{}
	var sent float64
	n := len(d.scratch) + cap(d.scratch)
	lbuf, sbuf, rest := make([]float64, n), make([]float64, n), make([]int, 0, n)
	for _, r := range d.byPoP[k] {
		ans := d.resolvers[r].answers[t]
		// The share of this resolver's streams that went to from.
		loads := lbuf[:len(ans)]
		if pick == "p2c" {
			load(loads, k, ans)
		}
		wFrom := 0.0
		sh := sbuf[:len(ans)]
		clear(sh)
		switch pick {
		case "first":
			if len(ans) > 0 && ans[0] == from {
				wFrom = 1
			}
		case "random":
			for _, o := range ans {
				if o == from {
					wFrom = 1 / float64(len(ans))
				}
			}
		default:
			pick2Shares(sh, loads)
			for j, o := range ans {
				if o == from {
					wFrom = sh[j]
				}
			}
		}
		if wFrom == 0 {
			continue
		}
		sent += wFrom
		others := rest[:0]
		at := -1
		for j, o := range ans {
			if o == from {
				at = j
				continue
			}
			others = append(others, o)
		}
		if len(others) == 0 {
			none += wFrom
			continue
		}
		switch pick {
		case "first":
			acc[ans[(at+1)%len(ans)]] += wFrom
		case "random":
			for _, o := range others {
				acc[o] += wFrom / float64(len(others))
			}
		default:
			ol := lbuf[:len(others)]
			load(ol, k, others)
			os := sbuf[:len(others)]
			pick2Shares(os, ol)
			for j, o := range others {
				acc[o] += wFrom * os[j]
			}
		}
	}
	if sent == 0 {
		return nil, nil, 1
	}
	for o := range acc {
		origins = append(origins, o)
	}
	slices.Sort(origins)
	for _, o := range origins {
		shares = append(shares, acc[o]/(sent-none))
	}
	return origins, shares, none / sent
}

// hand returns the hand of tenant t when placement is shuffle-sharded.
func (d *dnsModel) hand(t int) []int {
	if d.dealer == nil {
		return nil
	}
	return d.dealer.Hand(nil, d.tenantKeys[t])
}

// stepsOf converts a duration to whole steps, rounding to nearest.
func stepsOf(d, step time.Duration) int {
	return int(math.Round(float64(d) / float64(step)))
}

// renewals returns the sessions a second each resolver's hosts renew in
// the steady state before the run: the Initial devices of its PoP, shared
// evenly by the PoP's resolvers (as routes shares a PoP's attempts), over
// population.session_age.
func renewals(sc *scenario.Scenario, d *dnsModel) []float64 {
	pops := popShares(sc.Geography)
	initial := float64(scaleCount(sc.Population.Initial, sc.Scale))
	out := make([]float64, len(d.resolvers))
	for k, rs := range d.byPoP {
		for _, r := range rs {
			out[r] = initial * pops[k] / float64(len(rs)) / sc.Population.SessionAge.Seconds()
		}
	}
	return out
}
