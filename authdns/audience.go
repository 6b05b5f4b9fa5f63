package authdns

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/authdns/answer"
)

// audience learns each resolver's audience (resolvers.audience): the
// query path notes, for the sets whose answers teach (rrset.learn: fed by
// feedback, answers by class), which records each resolver's answer
// named and until when it caches them; every feedback interval the tick
// reads each origin's sessions opened since its last report
// (loadreport.Report.Opened), runs answer.AudienceConfig.Learn on every
// set and classes big the resolvers above resolvers.big_share of a set's
// opened sessions. A resolver is big when its query share or its
// audience in any set says so (resolvers.class).
//
// Memory is bounded: each set tracks at most resolvers.table_size
// resolvers; past that a new resolver's answers are not noted (counted
// in corral_dns_resolver_audience_dropped_total) until the tick frees
// the slots of the resolvers heard from least recently whose answers
// have expired, down to three quarters of the bound. A spray of forged
// sources can keep the table full, and then resolvers not tracked yet
// are not learned (they keep the class of their queries: the feature
// off, for them). The query path takes one mutex, only for those sets
// and only with audience on; the tick holds it while it learns (4,096
// resolvers per set: BenchmarkAudienceLearn in answer).
type audience struct {
	cfg  answer.AudienceConfig
	rule answer.ClassConfig
	max  int

	mu      sync.Mutex // guards sets, origins and last
	sets    map[string]*setAudience
	origins map[string]*originOpened // by advertised address
	last    time.Time                // the last tick's

	big     atomic.Pointer[classSet]
	view    atomic.Pointer[audienceView]
	dropped atomic.Uint64
}

// setAudience is what one set's answers taught, by slot: a tracked
// resolver's key, the records of its last answer, until when it caches
// it and when it asked.
type setAudience struct {
	slot    map[uint64]int
	keys    []uint64 // 0: a free slot
	answers [][]int
	expires []time.Time
	asked   []time.Time
	free    []int
	aud     answer.Audience

	rate    []float64 // by record, scratch of the tick
	held    [][]int   // by slot, scratch of the tick
	present bool      // served at the last tick
}

// originOpened is one origin's opened sessions as its reports give them:
// the count and time of the last report read and the rate since the one
// before; known is false until two reports of one run of the origin
// give a rate (a first report and a count that fell, a restarted
// origin, are baselines).
type originOpened struct {
	opened uint64
	at     time.Time
	rate   float64
	known  bool
	host   string
}

// originReport is what the tick reads of an origin's last report.
type originReport struct {
	addr, host string
	opened     uint64
	at         time.Time
}

// audienceView is what the last tick found, for metrics and the health
// page.
type audienceView struct {
	tracked int
	big     map[uint64]float64 // by key: its largest share of a set's opened sessions
}

func newAudience(cfg ResolversConfig) *audience {
	c := cfg.withDefaults()
	a := &audience{
		cfg:     answer.AudienceConfig{HalfLife: c.HalfLife}.WithDefaults(),
		rule:    answer.ClassConfig{BigShare: c.BigShare}.WithDefaults(),
		max:     c.TableSize,
		sets:    map[string]*setAudience{},
		origins: map[string]*originOpened{},
	}
	a.big.Store(&classSet{})
	a.view.Store(&audienceView{})
	return a
}

// setKey names a set across reloads: its owner, type and values, so that
// a reload that keeps a set keeps what it learned, and one that changes
// its records starts again.
func setKey(set *rrset) string {
	return set.owner + "/" + typeName(set.rtype) + "/" + strings.Join(set.values, ",")
}

// answered notes that the resolver of key got records idx of set at now.
// It allocates only for a resolver or a set it meets for the first time.
func (a *audience) answered(set *rrset, key uint64, idx []int, now time.Time) {
	if a == nil || key == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The set's entry, found by its key once per compiled set (a reload's
	// sets find the entry of the ones they replace) and kept on it: the
	// string key hashed per query cost 8 ns of the 80 that noting costs
	// (BenchmarkAudience). The tick drops an entry only when no served
	// set has its key, so a set still served never holds a dropped one.
	sa := set.aud
	if sa == nil {
		if sa = a.sets[set.learnKey]; sa == nil {
			sa = &setAudience{slot: map[uint64]int{}}
			a.sets[set.learnKey] = sa
		}
		set.aud = sa
	}
	i, ok := sa.slot[key]
	if !ok {
		switch {
		case len(sa.free) > 0:
			i, sa.free = sa.free[len(sa.free)-1], sa.free[:len(sa.free)-1]
		case len(sa.keys) < a.max:
			i = len(sa.keys)
			sa.keys, sa.answers = append(sa.keys, 0), append(sa.answers, nil)
			sa.expires, sa.asked = append(sa.expires, time.Time{}), append(sa.asked, time.Time{})
		default:
			a.dropped.Add(1)
			return
		}
		sa.slot[key], sa.keys[i] = i, key
	}
	sa.answers[i] = append(sa.answers[i][:0], idx...)
	sa.expires[i] = now.Add(time.Duration(set.ttl) * time.Second)
	sa.asked[i] = now
}

// tick learns the interval since the last tick (interval for the first)
// ending at now, for the sets of the zones now served, from the origins'
// last reports, and classes the resolvers. An origin's rate is its
// opened sessions between its last two reports; one with no newer report
// keeps its last rate; a record's rate is the sum over the fresh origins
// (reported within timeout) whose address or host is its value, and a
// record with none opens nothing. A set learns only when some origin's
// report is newer than at the last tick, and not while a record's origin
// is at a baseline (its rate unknown): a guess of 0 there would pull down
// every resolver its answers name. The classes come from what the sets
// learned so far, in every tick.
func (a *audience) tick(sets []*rrset, reports []originReport, now time.Time, interval, timeout time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	dt := interval
	if !a.last.IsZero() {
		dt = now.Sub(a.last)
	}
	a.last = now
	heard := false
	seen := make(map[string]bool, len(reports))
	for _, r := range reports {
		seen[r.addr] = true
		o := a.origins[r.addr]
		switch {
		case o == nil:
			a.origins[r.addr] = &originOpened{opened: r.opened, at: r.at, host: r.host}
		case !r.at.After(o.at):
		case r.opened < o.opened:
			*o = originOpened{opened: r.opened, at: r.at, host: r.host} // restarted
		default:
			o.rate, o.known = float64(r.opened-o.opened)/r.at.Sub(o.at).Seconds(), true
			o.opened, o.at = r.opened, r.at
			heard = true
		}
	}
	for addr := range a.origins {
		if !seen[addr] {
			delete(a.origins, addr)
		}
	}
	for _, sa := range a.sets {
		sa.present = false
	}
	view := &audienceView{big: map[uint64]float64{}}
	var big []uint64
	for _, set := range sets {
		sa := a.sets[set.learnKey]
		if sa == nil || sa.present {
			continue // nothing noted yet, or the same set twice
		}
		sa.present = true
		a.evict(sa, now)
		if learn := heard && dt > 0 && a.rates(sa, set, now, timeout); learn {
			if cap(sa.held) < len(sa.keys) {
				sa.held = make([][]int, len(sa.keys))
			}
			held := sa.held[:len(sa.keys)]
			for i := range held {
				held[i] = nil
				if sa.keys[i] != 0 && now.Before(sa.expires[i]) {
					held[i] = sa.answers[i]
				}
			}
			a.cfg.Learn(&sa.aud, held, sa.rate, dt)
		}
		for i, k := range sa.keys {
			if k == 0 || sa.aud.Of(a.rule, i) != answer.ClassBig {
				continue
			}
			if _, dup := view.big[k]; !dup {
				big = append(big, k)
			}
			view.big[k] = max(view.big[k], sa.aud.Est[i]/sa.aud.Total)
		}
		view.tracked += len(sa.slot)
	}
	for k, sa := range a.sets {
		if !sa.present {
			delete(a.sets, k) // a set no longer served
		}
	}
	a.big.Store(newClassSet(big))
	a.view.Store(view)
}

// rates sets sa.rate to the opened rate of each record of set and
// reports whether every one is known.
func (a *audience) rates(sa *setAudience, set *rrset, now time.Time, timeout time.Duration) bool {
	if len(sa.rate) != len(set.values) {
		sa.rate = make([]float64, len(set.values))
	}
	for i, v := range set.values {
		sa.rate[i] = 0
		for addr, o := range a.origins {
			if (addr != v && o.host != v) || now.Sub(o.at) > timeout {
				continue
			}
			if !o.known {
				return false
			}
			sa.rate[i] += o.rate
		}
	}
	return true
}

// evict frees, once a set tracks more than three quarters of its bound,
// the slots of the resolvers asked least recently whose answers have
// expired, down to three quarters.
func (a *audience) evict(sa *setAudience, now time.Time) {
	keep := a.max * 3 / 4
	if len(sa.slot) <= keep {
		return
	}
	var old []int
	for i, k := range sa.keys {
		if k != 0 && !now.Before(sa.expires[i]) {
			old = append(old, i)
		}
	}
	slices.SortFunc(old, func(x, y int) int { return sa.asked[x].Compare(sa.asked[y]) })
	for _, i := range old[:min(len(old), len(sa.slot)-keep)] {
		delete(sa.slot, sa.keys[i])
		sa.keys[i], sa.answers[i] = 0, sa.answers[i][:0]
		if i < len(sa.aud.Est) {
			sa.aud.Est[i] = 0
		}
		sa.free = append(sa.free, i)
	}
}

// bigByAudience returns the resolvers the last tick classed big by
// their audience, with their share of the opened sessions.
func (a *audience) bigByAudience() map[netip.Prefix]float64 {
	v := a.view.Load()
	out := make(map[netip.Prefix]float64, len(v.big))
	for k, s := range v.big {
		out[keyPrefix(k)] = s
	}
	return out
}
