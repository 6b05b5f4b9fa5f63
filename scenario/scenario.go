package scenario

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/internal/config"
)

// Scenario is one scenario file. Every field is an input: a population, a
// topology, capacities and policies. No field sets an outcome. The zero
// value is not a valid scenario; build one with Load or Decode, or fill the
// fields and call WithDefaults then Validate.
type Scenario struct {
	// Name identifies the scenario in reports.
	Name string `yaml:"name"`
	// Description says what the scenario stands for and where its figures
	// come from.
	Description string `yaml:"description"`
	// Seed makes a run reproducible: the same file and seed give the same
	// result. Default 1.
	Seed uint64 `yaml:"seed"`
	// Duration is the event time simulated. Required.
	Duration time.Duration `yaml:"duration"`
	// Step is the time step of sim (kraken schedules each event at its own
	// time). Default 1s.
	Step time.Duration `yaml:"step"`
	// Scale is the population factor: every count of devices and every
	// capacity is multiplied by it. Default 1 (full size). kraken replays a
	// file at a small Scale against a fabric sized by the same factor.
	Scale float64 `yaml:"scale"`

	Population Population `yaml:"population"`
	Target     Target     `yaml:"target"`
	Geography  Geography  `yaml:"geography"`
	DNS        DNS        `yaml:"dns"`
	Edge       Edge       `yaml:"edge"`
	Origins    []Origin   `yaml:"origins"`
	Overload   Overload   `yaml:"overload"`
	Client     Client     `yaml:"client"`
	Traffic    Traffic    `yaml:"traffic"`
	Stop       Stop       `yaml:"stop"`
	Sweep      Sweep      `yaml:"sweep"`
	Sim        SimOptions `yaml:"sim"`

	// src and data are the file's name and bytes, for Locate; set holds
	// the key paths the file sets (see WithDefaults).
	src  string
	data []byte
	set  map[string]bool
	// feedbackSwept marks a variant whose dns.feedback a sweep turned on
	// or off: its bounds are the file's for both. resolversSwept is the
	// same for dns.resolvers.
	feedbackSwept  bool
	resolversSwept bool
}

// Population says how many devices there are and how they divide.
type Population struct {
	// Devices is the number of devices the scenario can hold at its peak:
	// the initially connected ones plus every arrival. Required; the sum of
	// Initial and the arrivals' devices must not exceed it (the rest stay
	// offline for the whole run).
	Devices int64 `yaml:"devices"`
	// Initial is the number of devices connected at time zero, spread over
	// the origins as a balanced steady state.
	Initial int64 `yaml:"initial"`
	// SessionAge is how often, in the steady state before the run, each
	// of the Initial devices renews its session (an edge's
	// max_session_age ends every session after it, +-10 %). Only
	// dns.resolvers.audience reads it: the renewals are what authdns
	// learned the resolvers' audiences from before the run (0: nothing
	// was renewed, nothing learned). The run itself does not renew.
	SessionAge time.Duration `yaml:"session_age"`
	// Protocol is the persistent connection the devices hold: "grpc" or
	// "websocket". Default "grpc". sim treats both alike; kraken opens
	// that kind of connection.
	Protocol string `yaml:"protocol"`
	// Priorities divide the devices by priority class, most important first
	// (P0 first). Shares must add up to 1. Default: one class "P0".
	Priorities []Priority `yaml:"priorities"`
	// Tenants is the number of tenants the devices belong to, in equal
	// shares. Default 1. Shuffle-sharded placement deals each tenant a hand.
	Tenants int `yaml:"tenants"`
	// Channels is the number of channels each device subscribes to: the
	// tenant's channels c0 .. c(Channels-1), shared by every device of the
	// tenant. Default 1. sim does not model messages; kraken subscribes.
	Channels int `yaml:"channels"`
}

// Priority is one priority class of devices.
type Priority struct {
	// Name labels the class in reports ("P0").
	Name string `yaml:"name"`
	// Share is the fraction of devices in the class, in (0, 1].
	Share float64 `yaml:"share"`
}

// Geography spreads devices over CDN points of presence (PoPs) and gives
// each PoP its edge hosts and recursive resolvers.
type Geography struct {
	// PoPs is the number of points of presence. Default 1.
	PoPs int `yaml:"pops"`
	// Distribution is "zipf" (share of PoP i proportional to 1/i^s) or
	// "explicit" (Shares). Default "zipf".
	Distribution string `yaml:"distribution"`
	// ZipfExponent is s of the zipf distribution. Default 1.
	ZipfExponent float64 `yaml:"zipf_exponent"`
	// Shares are the PoP shares for the explicit distribution; one per PoP,
	// adding up to 1.
	Shares []float64 `yaml:"shares"`
	// HostsPerPoP is the number of edge hosts in each PoP. Default 1.
	HostsPerPoP int `yaml:"hosts_per_pop"`
	// HostsPerResolver is how many edge hosts of a PoP share one recursive
	// resolver (and so one cached answer). Default: all hosts of a PoP.
	HostsPerResolver int `yaml:"hosts_per_resolver"`
}

// DNS is the routing policy of the origin name and its records.
type DNS struct {
	// Policy is the answer selection policy of authdns/answer: "simple",
	// "weighted" (one record per answer, drawn by weight), "multivalue" (up
	// to MaxAnswers healthy records), "failover", "weighted-subset"
	// (MaxAnswers records drawn by weight) or "shuffle" (the tenant's hand
	// of HandSize records). Required.
	Policy string `yaml:"policy"`
	// TTL is how long a resolver caches an answer. Default 60s.
	TTL time.Duration `yaml:"ttl"`
	// MaxAnswers bounds the records in one answer. Default 8.
	MaxAnswers int `yaml:"max_answers"`
	// HandSize is the size of a tenant's hand for the shuffle policy.
	HandSize int `yaml:"hand_size"`
	// Spill is the number of records outside its hand a tenant's answer
	// may spill to when none of its hand is healthy (shuffle policy). 0
	// means no spill: the answer fails open to the whole hand.
	Spill int `yaml:"spill"`
	// HealthCheck says how fast the DNS health view notices an origin that
	// went down.
	HealthCheck HealthCheck `yaml:"health_check"`
	// Feedback is authdns's load feedback: the origins' load moves the
	// effective weights of the weighted, weighted-subset and multivalue
	// policies. Off unless Enabled (or a sweep turns it on).
	Feedback Feedback `yaml:"feedback"`
	// Resolvers is authdns's resolver-aware answers: each resolver's
	// share of the queries classes it big or small, and big resolvers get
	// BigN records. Off unless Enabled (or a sweep turns it on).
	Resolvers Resolvers `yaml:"resolvers"`
	// BigN is the most records of an answer to a big resolver of the
	// multivalue and weighted-subset policies, and of weighted with
	// BigWeightedSubset (authdns's per-set big_n): 0 means every healthy
	// record; at least MaxAnswers otherwise.
	BigN int `yaml:"big_n"`
	// BigWeightedSubset answers big resolvers of the weighted policy with
	// a weighted subset of BigN records instead of one (authdns's
	// big_weighted_subset).
	BigWeightedSubset bool `yaml:"big_weighted_subset"`
}

// Resolvers is resolver-aware answers as authdns runs them (its
// `resolvers` block): the queries each modelled resolver sends (one when
// a cached answer expires) are counted over a sliding Window, and every
// Window/8 each resolver is classed big when it sent more than BigShare
// of them (authdns/answer's ClassConfig.Of). The defaults are authdns's.
// authdns's table_size and prefixes have no counterpart: the simulator
// counts each resolver exactly. The zero value is off.
type Resolvers struct {
	// Enabled turns resolver-aware answers on.
	Enabled bool `yaml:"enabled"`
	// Window is the sliding window of the query shares (default 60s).
	Window time.Duration `yaml:"window"`
	// BigShare: a resolver that sends more than this share of the
	// queries is big (default 0.01; 0 < BigShare < 1).
	BigShare float64 `yaml:"big_share"`
	// Audience learns each resolver's audience from the sessions the
	// origins report opening (answer.AudienceConfig.Learn, authdns's
	// resolvers.audience) and classes big, too, a resolver above
	// BigShare of the sessions; its big answers leave one record out
	// (answer.Config.BigLeaveOut). It reads the load reports, so it
	// learns only in runs with dns.feedback on.
	Audience bool `yaml:"audience"`
	// HalfLife is the audience estimates' half-life (default 60s,
	// answer.DefaultAudienceHalfLife).
	HalfLife time.Duration `yaml:"half_life"`
}

// Feedback is load feedback as authdns runs it (its `feedback` config):
// every Interval each origin's load (its handshakes in flight against its
// adaptive limit and its shedding stage, as hubs and edges report them)
// moves the factor of its DNS weight one step by authdns/answer's rule,
// and the answers carry at most MaxTTL.
// The bounds and their defaults are answer.FeedbackConfig's. The zero
// value is off.
type Feedback struct {
	// Enabled turns feedback on.
	Enabled bool `yaml:"enabled"`
	// Interval is how often the weights move (default 1s, authdns's
	// feedback.interval and the origins' load report interval).
	Interval time.Duration `yaml:"interval"`
	// Floor is the least factor of a configured weight (default 0.1),
	// Ceiling the largest (default 2), MaxStep the most it moves per
	// interval (default 0.25), Hysteresis the least move followed
	// (default 0.05).
	Floor      float64 `yaml:"floor"`
	Ceiling    float64 `yaml:"ceiling"`
	MaxStep    float64 `yaml:"max_step"`
	Hysteresis float64 `yaml:"hysteresis"`
	// Timeout: an origin silent this long (down: it reports nothing) gets
	// its configured weight back (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxTTL caps the TTL of the answers of the policies feedback
	// weights, as authdns's feedback.max_ttl does: the resolvers cache
	// them for the shorter of the TTL and MaxTTL (default 30s,
	// answer.DefaultFeedbackMaxTTL; whole seconds).
	MaxTTL time.Duration `yaml:"max_ttl"`
}

// HealthCheck is the active health check behind the DNS health view.
type HealthCheck struct {
	// Interval between checks. Default 10s.
	Interval time.Duration `yaml:"interval"`
	// Threshold is the number of failed checks in a row before an origin
	// is marked unhealthy, and of passed checks in a row before it is
	// healthy again. Default 3.
	Threshold int `yaml:"threshold"`
	// Kind is what a check sees: "tcp" (a connection to the origin: it
	// fails only while the origin is down) or "stream" (a stream through
	// the origin as a device opens one, as a gRPC health check through a
	// load balancer to a hub does: it also fails while the origin is up
	// but refusing new streams, full, its backlog full, or its set-up
	// queue longer than Timeout). Default "tcp".
	Kind string `yaml:"kind"`
	// Timeout is how long a stream check waits for its answer. Default 2s
	// (Route 53's HTTP and HTTPS checks want the answer within two seconds
	// of connecting).
	Timeout time.Duration `yaml:"timeout"`
}

// Edge says how an edge host uses a DNS answer.
type Edge struct {
	// Pick is "first" (the first address of the answer), "random" (any
	// address, uniformly) or "p2c" (the less loaded of two random
	// addresses). Default "first".
	Pick string `yaml:"pick"`
	// StreamsPerConnection is how many device streams an edge host carries
	// over one upstream connection to an origin (HTTP/2 multiplexing:
	// RFC 9113 recommends allowing at least 100 concurrent streams). An
	// origin then pays a TLS handshake (max_new_per_second) only when the
	// pool grows, and a stream set-up (max_new_streams_per_second) for
	// every device. Default 1: every device stream is its own connection
	// (devices straight to the origins).
	StreamsPerConnection int `yaml:"streams_per_connection"`
	// Attempts is how many addresses of its cached answer an edge host
	// tries for one device's stream when an origin refuses it at once
	// (down, full, backlog full) before the device sees the error and
	// backs off: the second try goes to another address by the Pick rule
	// (first: the next address of the answer). A shed stream (with its
	// retry-after) and a timeout are not retried. Default 1.
	Attempts int `yaml:"attempts"`
}

// Origin is a group of identical origins (load balancers, hubs). The
// capacities are engineering assumptions and must say so in the file's
// comments.
type Origin struct {
	// Name prefixes the origins' names ("lb" gives lb-1, lb-2, ...).
	Name string `yaml:"name"`
	// Count is the number of origins in the group. Default 1.
	Count int `yaml:"count"`
	// Region names where the group runs; region loss takes a region down.
	Region string `yaml:"region"`
	// Weight is the DNS weight of each record of the group. Default 1.
	Weight int `yaml:"weight"`
	// Secondary marks the group's records as failover secondaries (the
	// failover policy answers them only when no primary is healthy).
	Secondary bool `yaml:"secondary"`
	// MaxConnections is the number of concurrent connections one origin
	// holds. Set it or Headroom.
	MaxConnections int64 `yaml:"max_connections"`
	// Headroom sizes MaxConnections from an assumption instead: the group
	// together holds Headroom times the population's devices, split evenly
	// over its origins (1.5 means 50 % spare when load is even).
	Headroom float64 `yaml:"headroom"`
	// MaxNewPerSecond is the rate of new connections (TLS handshakes plus
	// session setup) one origin completes per second. Required.
	MaxNewPerSecond float64 `yaml:"max_new_per_second"`
	// MaxNewStreamsPerSecond is the rate of device streams one origin sets
	// up per second when they come over pooled connections (the session
	// set-up behind a load balancer: Hello, token check, Subscribe). 0
	// means stream set-ups are bounded by MaxNewPerSecond alone; required
	// when edge.streams_per_connection is above 1.
	MaxNewStreamsPerSecond float64 `yaml:"max_new_streams_per_second"`
	// Backlog bounds the handshakes waiting at one origin; an attempt that
	// finds it full is refused at once. 0 means unbounded.
	Backlog int64 `yaml:"backlog"`
	// HandshakeLatency is the time a handshake takes on an idle origin.
	// Default 50ms.
	HandshakeLatency time.Duration `yaml:"handshake_latency"`
	// MaxRequestsPerSecond is the rate of requests on held connections one
	// origin serves. 0 means requests are not modelled for the group.
	MaxRequestsPerSecond float64 `yaml:"max_requests_per_second"`
	// TeardownPerSecond is the rate at which one origin ends sessions when
	// it does nothing else: a session that ends while the origin is up
	// (dropped by its device, severed, mass-closed) costs it
	// 1/TeardownPerSecond of its time, spent in the same first-in
	// first-out queue as the handshakes, so a herd's return waits behind
	// the teardown of the sessions it lost. An origin that crashes ends
	// nothing. Absent: ending a session is free; an explicit value must be
	// positive. bench/sim/calibrate measures it from a hub's own counts.
	TeardownPerSecond float64 `yaml:"teardown_per_second"`
}

// Overload says what an origin does past its capacity.
type Overload struct {
	// Mode is "errors" (no admission control: handshakes queue up to the
	// backlog and fail once they are late) or "adaptive" (the limit
	// package's controller bounds the handshakes in flight, P0 first, and
	// its staged shedder, with LatencyStages, rejects the lowest
	// priorities first; every refusal carries a retry-after hint).
	// Default "errors".
	Mode string `yaml:"mode"`
	// Algorithm is the limit algorithm of adaptive mode: "gradient",
	// "vegas", "aimd" or "fixed". Default "gradient".
	Algorithm string `yaml:"algorithm"`
	// RetryAfter is the least retry-after hint sent with a shed attempt or
	// a severed session; the shedder stretches it while overload lasts.
	// Default 5s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// Target is the handshake latency above which the staged shedder
	// counts an origin as overloaded (an operator's objective, not an
	// outcome; read with LatencyStages, and as the AIMD algorithm's
	// timeout). Default 250ms.
	Target time.Duration `yaml:"target"`
	// LatencyStages feeds the handshake latency to the staged shedder,
	// so that latency above Target raises its stage (rejecting P2, then
	// severing it, then P1, ...). Default false, as corral's servers
	// ship: the hub's overload.latency_stages and the edge's
	// admission.latency_stages are off by default (hub/config.go,
	// edge/config.go), their stages moving on heap and file descriptors
	// only, since a session refused at its Hello has already cost the
	// set-up it would save; sim models neither, so without it the stage
	// stays normal and the limit on handshakes in flight alone admits.
	LatencyStages bool `yaml:"latency_stages"`
}

// Client is what every device does.
type Client struct {
	// Backoff is the reconnect policy, in the backoff package's terms.
	Backoff backoff.Config `yaml:"backoff"`
	// ConnectTimeout is how long a device waits for a handshake before it
	// gives up and backs off. Default 10s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// RequestsPerSecond is the rate of requests each held connection sends.
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	// CatchupRequests is the number of "what did I miss" requests a device
	// sends after each successful (re)connection. Default 1.
	CatchupRequests float64 `yaml:"catchup_requests"`
}

// Load reads the scenario file at path strictly (see the package
// documentation), fills defaults and validates it.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return Decode(path, data)
}

// Decode is Load on bytes already read; name is used in messages.
func Decode(name string, data []byte) (sc *Scenario, err error) {
	// The YAML library panics on a few malformed inputs (a tag with no
	// value where a list is expected: "backoff: !x"); a scenario file is
	// user input, so that becomes an error.
	defer func() {
		if r := recover(); r != nil {
			sc, err = nil, fmt.Errorf("scenario: %s: the YAML decoder failed on this file (%v); check the line with a tag (!...) or an unusual value", name, r)
		}
	}()
	if err := rejectOutcomes(name, data); err != nil {
		return nil, err
	}
	// The keys the file sets are known before config.Decode validates, so
	// that an explicit zero is validated as given, not as its default.
	s := Scenario{set: keysSet(data)}
	if err := config.Decode(name, data, &s, config.Options{}); err != nil {
		return nil, decodeError{err}
	}
	s.WithDefaults()
	s.src, s.data = name, data
	return &s, nil
}

// Locate names the file, line and column of every key path error in err
// (errors made with Errorf, whose paths are the file's dotted key
// paths: "traffic.region_loss[0]"): a key missing from
// the file is placed at its nearest parent present. Callers that refuse
// what a valid scenario holds (kraken refusing a key it cannot run) use it
// so that their messages point at the line as Load's own do. Locate on a
// Scenario not read by Load or Decode returns err unchanged, and nil for
// nil.
func (s *Scenario) Locate(err error) error {
	if err == nil || s.data == nil {
		return err
	}
	return decodeError{config.Locate(s.src, s.data, &Scenario{}, err)}
}

// Errorf returns an error about the key at path (the file's dotted key
// path, "traffic.poison[0].tenant") for Locate to place in the file.
func Errorf(path, format string, args ...any) error {
	return config.Errorf(path, format, args...)
}

// File returns the name of the file s was read from ("" when it was not).
func (s *Scenario) File() string { return s.src }

// Source returns a copy of the bytes s was decoded from (nil when it was
// not read by Load or Decode): what another process decodes to run the
// same scenario (kraken's agents).
func (s *Scenario) Source() []byte { return slices.Clone(s.data) }

// decodeError is a config error told in the scenario package's name.
type decodeError struct{ err error }

func (e decodeError) Error() string {
	return "scenario: " + strings.TrimPrefix(e.err.Error(), "config: ")
}

func (e decodeError) Unwrap() error { return e.err }
