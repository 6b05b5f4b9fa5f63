package hostcheck

// DeployConnections is the number of connections per host that the files
// under deploy/ are sized for: their sysctls and LimitNOFILE meet Want of
// every setting for this many connections (deploy's test checks it).
const DeployConnections = 1_000_000

// fdMargin is what a server holds besides its connections: listeners,
// NATS and gRPC upstream connections, files, the epoll set.
const fdMargin = 4096

// Settings is the table of host settings a server holding many idle
// connections needs, in the order doctor reports them. It is the one source
// of truth for `corral doctor` and for the files under deploy/.
var Settings = []Setting{
	{
		Name:  "RLIMIT_NOFILE",
		Kind:  Rlimit,
		Scope: Process,
		Why:   "every connection is a file descriptor; soft and hard limit of the process",
		want:  func(n int64) []Bound { return []Bound{atLeast(n + fdMargin), atLeast(n + fdMargin)} },
	},
	{
		Name:  "fs.nr_open",
		Kind:  Sysctl,
		Scope: Node,
		Why:   "the ceiling of RLIMIT_NOFILE: a hard limit above it cannot be set",
		want:  func(n int64) []Bound { return []Bound{atLeast(n + fdMargin)} },
	},
	{
		Name:  "fs.file-max",
		Kind:  Sysctl,
		Scope: Node,
		Why:   "open files of the whole system",
		want:  func(n int64) []Bound { return []Bound{atLeast(n + 16*fdMargin)} },
	},
	{
		Name:  "net.core.somaxconn",
		Kind:  Sysctl,
		Scope: NetNS,
		Why:   "the accept backlog: Go listens with this value, and a herd's handshakes wait in it",
		want:  func(n int64) []Bound { return []Bound{atLeast(backlog(n))} },
	},
	{
		Name:  "net.ipv4.tcp_max_syn_backlog",
		Kind:  Sysctl,
		Scope: NetNS,
		Why:   "half-open connections of a herd waiting for their final ACK",
		want:  func(n int64) []Bound { return []Bound{atLeast(backlog(n))} },
	},
	{
		Name:     "net.ipv4.ip_local_port_range",
		Kind:     Sysctl,
		Scope:    NetNS,
		KubeSafe: true,
		Why:      "ephemeral ports per source address and destination; starts above the servers' ports",
		want:     func(int64) []Bound { return []Bound{between(1024, 10240), atLeast(65535)} },
	},
	{
		Name:  "net.ipv4.tcp_tw_reuse",
		Kind:  Sysctl,
		Scope: NetNS,
		Why:   "reuse TIME_WAIT sockets for new outbound connections after a mass close (2, the default, is loopback only)",
		want:  func(int64) []Bound { return []Bound{between(1, 1)} },
	},
	{
		Name:  "net.ipv4.tcp_max_tw_buckets",
		Kind:  Sysctl,
		Scope: NetNS,
		Why:   "TIME_WAIT sockets kept after a mass close before the kernel drops them with a warning",
		want:  func(n int64) []Bound { return []Bound{atLeast(n)} },
	},
	{
		Name:  "net.ipv4.tcp_mem",
		Kind:  Sysctl,
		Scope: Node,
		Why:   "pages of socket buffers of the system (low, pressure, max): one page queued on each idle connection must stay under pressure",
		want:  func(n int64) []Bound { return []Bound{anyValue(), atLeast(n), atLeast(2 * n)} },
	},
	{
		Name:  "net.ipv4.tcp_rmem",
		Kind:  Sysctl,
		Scope: NetNS,
		Why:   "receive buffer per socket (min, default, max): an idle socket under pressure shrinks to min",
		want:  func(int64) []Bound { return []Bound{atMost(4096), anyValue(), anyValue()} },
	},
	{
		Name:  "net.ipv4.tcp_wmem",
		Kind:  Sysctl,
		Scope: NetNS,
		Why:   "send buffer per socket (min, default, max): an idle socket under pressure shrinks to min",
		want:  func(int64) []Bound { return []Bound{atMost(4096), anyValue(), anyValue()} },
	},
	{
		Name:     "net.netfilter.nf_conntrack_max",
		Kind:     Sysctl,
		Scope:    Node,
		Optional: true,
		Why:      "connection tracking (when the module is loaded) drops new connections once its table is full",
		want:     func(n int64) []Bound { return []Bound{atLeast(n + n/4)} },
	},
}

// backlog is the accept backlog wanted for n connections: a sixteenth of
// them arriving at once, at least 4096, at most 65535 (the kernel's
// ceiling on older releases and Go's).
func backlog(n int64) int64 { return min(max(n/16, 4096), 65535) }

// Lookup returns the setting of the table with that name.
func Lookup(name string) (Setting, bool) {
	for _, s := range Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}
