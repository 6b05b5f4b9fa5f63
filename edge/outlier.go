package edge

import "time"

// Outlier detection after Envoy's consecutive 5xx ejection. The failure
// count is an atomic of the Origin (the hot path of a failing origin adds
// one); the ejection decision takes Origins.mu, because the share of
// ejected origins is a property of the whole set.

// failure counts one failure of o (for p2c's score too, so also with the
// ejection disabled) and ejects it at the threshold.
func (s *Origins) failure(o *Origin) {
	now := s.now()
	o.penalize(now.UnixNano())
	n := o.failures.Add(1)
	if n > maxCountedFailures {
		o.failures.CompareAndSwap(n, maxCountedFailures)
	}
	oc := s.cfg.Outlier
	if oc.Disabled || int(n) < oc.ConsecutiveFailures {
		return
	}
	s.eject(o, now)
}

// maxCountedFailures bounds the consecutive failure count of an origin
// that fails for ever, far below the overflow of its counter.
const maxCountedFailures = 1 << 20

// eject ejects o at now unless it is ejected already, left the answer, a
// success reset its count meanwhile, or the ejection would exceed
// max_ejection_percent of the answer (one ejection is always allowed).
// The ejection lasts base_ejection_time times the number of times o was
// ejected, less one for every interval o spent in service since its last
// ejection ended, capped by max_ejection_time.
func (s *Origins) eject(o *Origin, now time.Time) {
	oc := s.cfg.Outlier
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := now.UnixNano()
	if int(o.failures.Load()) < oc.ConsecutiveFailures || !o.inAnswer.Load() {
		return
	}
	if o.ejectedUntil.Load() > ns {
		// Failures of exchanges begun before the ejection: they count
		// towards nothing.
		o.failures.Store(0)
		return
	}
	sn := s.snap.Load()
	ejected := 0
	for _, x := range sn.list {
		if x.ejectedUntil.Load() > ns {
			ejected++
		}
	}
	if ejected > 0 && (ejected+1)*100 > oc.MaxEjectionPercent*len(sn.list) {
		s.ejectSkipped.Add(1)
		if int(o.failures.Load()) > oc.ConsecutiveFailures {
			return // logged at the first refusal; counted every time
		}
		s.log.Warn("origin not ejected: max_ejection_percent reached", "origin", o.addr,
			"ejected", ejected, "origins", len(sn.list), "max_ejection_percent", oc.MaxEjectionPercent)
		return
	}
	m := o.multiplier
	if m > 0 && ns > o.lastUntil {
		m -= int(min((ns-o.lastUntil)/int64(oc.Interval), int64(m)))
	}
	m++
	d := time.Duration(m) * oc.BaseEjectionTime
	if d >= oc.MaxEjectionTime {
		d = oc.MaxEjectionTime
		m = int((oc.MaxEjectionTime + oc.BaseEjectionTime - 1) / oc.BaseEjectionTime)
	}
	until := ns + int64(d)
	o.multiplier, o.lastUntil = m, until
	o.ejectedUntil.Store(until)
	o.failures.Store(0)
	o.ejections.Add(1)
	s.log.Warn("origin ejected", "origin", o.addr, "for", d, "times", m,
		"consecutive_failures", oc.ConsecutiveFailures)
}

// ejectedCount returns how many origins of the answer are ejected at now.
func (s *Origins) ejectedCount(now time.Time) int {
	sn := s.snap.Load()
	if sn == nil {
		return 0
	}
	ns, n := now.UnixNano(), 0
	for _, o := range sn.list {
		if o.ejectedUntil.Load() > ns {
			n++
		}
	}
	return n
}
