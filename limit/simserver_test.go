package limit

import (
	"math"
	"math/rand/v2"
	"time"
)

// psServer is a simulated processor-sharing server with a knee: up to
// capacity jobs run at full speed; beyond it every job slows down in
// proportion, so latency = service x in-flight / capacity. Time advances
// only through step; nothing sleeps.
type psServer struct {
	capacity int
	service  time.Duration // mean service time at full speed
	jitter   float64       // service time is uniform in mean x [1-jitter, 1+jitter]
	sigma    float64       // log-normal noise of this width on each job's work, none at 0
	rng      *rand.Rand
	jobs     []simJob
	done     int64 // completed jobs
}

type simJob struct {
	tok       Token
	start     time.Time
	remaining float64 // ns of work left at full speed
	prio      Priority
}

func newPSServer(capacity int, service time.Duration, seed uint64) *psServer {
	return &psServer{capacity: capacity, service: service, jitter: 0.2, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (s *psServer) admit(tok Token, now time.Time, p Priority) {
	f := 1 + s.jitter*(2*s.rng.Float64()-1)
	if s.sigma > 0 {
		f *= math.Exp(s.sigma * s.rng.NormFloat64())
	}
	s.jobs = append(s.jobs, simJob{tok: tok, start: now, remaining: f * float64(s.service), prio: p})
}

// step advances the server by dt ending at now and calls fin for each job
// that completes, with its latency.
func (s *psServer) step(now time.Time, dt time.Duration, fin func(j simJob, rtt time.Duration)) {
	n := len(s.jobs)
	if n == 0 {
		return
	}
	rate := min(1, float64(s.capacity)/float64(n))
	work := rate * float64(dt)
	kept := s.jobs[:0]
	for _, j := range s.jobs {
		j.remaining -= work
		if j.remaining <= 0 {
			s.done++
			fin(j, now.Sub(j.start))
			continue
		}
		kept = append(kept, j)
	}
	clear(s.jobs[len(kept):])
	s.jobs = kept
}

var simEpoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
