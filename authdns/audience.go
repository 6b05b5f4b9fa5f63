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
// reads each origin's sessions opened since the last reports
// (loadreport.Report.Opened), runs answer.AudienceConfig.Learn on every
// set and classes big the resolvers above resolvers.big_share of a set's
// opened sessions. A resolver is big when its query share or its
// audience in any set says so (resolvers.class).
//
// Memory is bounded: each set tracks at most resolvers.table_size
// resolvers; past that a new resolver's answers are not noted (counted
// in corral_dns_resolver_audience_dropped_total) until the tick frees
// the slots of the resolvers heard from least recently whose answers
// have expired, down to three quarters of the bound. The query path
// takes one mutex, only for those sets and only with audience on.
type audience struct {
	cfg  answer.AudienceConfig
	rule answer.ClassConfig
	max  int

	mu   sync.Mutex // guards sets
	sets map[string]*setAudience

	big     atomic.Pointer[classSet]
	view    atomic.Pointer[audienceView]
	dropped atomic.Uint64
	last    time.Time // the last tick's, guarded by mu
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

	// last is each record's last report read, rate the opened rate it
	// gave (kept until a newer report comes).
	last    []answer.Load
	rate    []float64
	held    [][]int // scratch of the tick
	present bool    // seen at the last tick
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
		cfg:  answer.AudienceConfig{HalfLife: c.HalfLife}.WithDefaults(),
		rule: answer.ClassConfig{BigShare: c.BigShare}.WithDefaults(),
		max:  c.TableSize,
		sets: map[string]*setAudience{},
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
func (a *audience) answered(set *rrset, key uint64, idx []int, now time.Time) {
	if key == 0 {
		return
	}
	k := setKey(set)
	a.mu.Lock()
	defer a.mu.Unlock()
	sa := a.sets[k]
	if sa == nil {
		sa = &setAudience{slot: map[uint64]int{}}
		a.sets[k] = sa
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
// ending at now from the loads of the origins by record value
// (feedback.byValue), for the sets of the zones now served, and classes
// the resolvers.
func (a *audience) tick(sets []*rrset, loads map[string]answer.Load, now time.Time, interval, timeout time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	dt := interval
	if !a.last.IsZero() {
		dt = now.Sub(a.last)
	}
	a.last = now
	if dt <= 0 {
		return
	}
	for _, sa := range a.sets {
		sa.present = false
	}
	view := &audienceView{big: map[uint64]float64{}}
	var big []uint64
	for _, set := range sets {
		sa := a.sets[setKey(set)]
		if sa == nil {
			continue
		}
		sa.present = true
		if len(sa.last) != len(set.values) {
			sa.last, sa.rate = make([]answer.Load, len(set.values)), make([]float64, len(set.values))
		}
		heard := false
		for i, v := range set.values {
			l, ok := loads[v]
			switch {
			case !ok || now.Sub(l.At) > timeout:
				sa.rate[i] = 0 // silent: nothing known to open
			case !l.At.After(sa.last[i].At):
				heard = heard || sa.rate[i] > 0 // no newer report: the last rate holds
			case sa.last[i].At.IsZero() || l.Opened < sa.last[i].Opened:
				sa.rate[i] = 0 // a first report, or a restarted origin: a baseline
				sa.last[i] = l
			default:
				sa.rate[i] = float64(l.Opened-sa.last[i].Opened) / l.At.Sub(sa.last[i].At).Seconds()
				sa.last[i] = l
				heard = true
			}
		}
		if !heard {
			continue // no report says anything: nothing to learn
		}
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
		for i, k := range sa.keys {
			if k == 0 || sa.aud.Of(a.rule, i) != answer.ClassBig {
				continue
			}
			share := sa.aud.Est[i] / sa.aud.Total
			if _, seen := view.big[k]; !seen {
				big = append(big, k)
			}
			view.big[k] = max(view.big[k], share)
		}
	}
	for k, sa := range a.sets {
		if !sa.present {
			delete(a.sets, k) // a set no longer served
			continue
		}
		a.evict(sa, now)
		view.tracked += len(sa.slot)
	}
	a.big.Store(newClassSet(big))
	a.view.Store(view)
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
