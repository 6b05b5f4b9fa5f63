#!/usr/bin/env bash
# bench/kraken/queue.sh: a herd on a hub whose listen queue overflows, and
# how it comes back: whether kraken's devices connect independently, as a
# real fleet's do (issue 14: one device's dropped SYN delays that device
# only), or stall together.
#
#   bash bench/kraken/queue.sh [-n 10000] [-agents 2] [-somaxconn 1000]
#
# Runs in a network namespace of its own (unshare -n: root; its own
# loopback, its own kernel counters) with net.core.somaxconn -somaxconn:
# one `corral hub` (memory history, pings every 10 min, no admission
# control) on 127.0.9.1:7400 and `corral kraken run` of N devices over
# -agents agent processes: all connect (the warm-up), all are dropped at
# 2 s and come back under full jitter of 300 ms .. 1 s (the measuring
# herd of bench/sim/calibrate.sh). Every 0.1 s (plus the time a sample
# takes, about 0.1 s) it reads the hub's corral_hub_sessions_opened_total,
# its listen queue (ss), the kernel's TcpExt ListenOverflows and
# TCPSynRetrans, its Tcp ActiveOpens (connects started: the devices' and
# the sampler's one) and each agent's RSS, and prints a line per sample
# in which anything moved: seconds since the first sample, sessions
# opened, the queue, overflows, SYN retransmissions, connects started,
# the agents' RSS in KiB. Then the kernel's totals over the run and
# kraken's connect latency.
#
# What to look for: connects started in bursts, each after a stall in
# which nothing opens, nothing connects and the queue is empty, the stall
# ended by SYN retransmissions in multiples of the agents' dial workers,
# is a shared pool of dialers blocked on dropped SYNs (kraken before
# 2026-12-02: 64 per agent, stalls ended by 119-128 retransmissions).
# Every device's connect started at its attempt, and retransmissions in
# any count, at the devices' own 1 s timers, is a fleet of independent
# devices. Timing figures are shape only on a shared machine.
#
# Needs Go, curl, jq, ss, unshare, ip and sysctl. N / agents must stay below
# the file limit (20,000).
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
args=("$@")
cd "$(dirname "$0")/../.."

N=10000
AGENTS=2
SOMAXCONN=1000
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-agents) AGENTS=$2; shift 2 ;;
	-somaxconn) SOMAXCONN=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
case "$SOMAXCONN" in '' | *[!0-9]*) echo "-somaxconn: want a number of connections, got $SOMAXCONN" >&2; exit 2 ;; esac
if [ -z "${QUEUE_NETNS:-}" ]; then
	exec unshare -n env QUEUE_NETNS=1 bash -c 'ip link set lo up && sysctl -qw net.core.somaxconn="$1" && shift && exec bash "$@"' \
		netns "$SOMAXCONN" "$self" "${args[@]}"
fi

work=$(mktemp -d /tmp/corral-bench-queue.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral
export QUEUE_SECRET=bench-secret-0123456789abcdef
NET=127.0.9

# counter TABLE NAME: the kernel's counter NAME of /proc/net/TABLE's
# TABLE: lines (netstat TcpExt, snmp Tcp).
counter() { awk -v t="$2:" -v k="$3" '$1 == t { if (!h) { for (i = 1; i <= NF; i++) if ($i == k) c = i; h = 1 } else print $c }' "/proc/net/$1"; }

cat >"$work/hub.yaml" <<YAML
listen: $NET.1:7400
grpc_listen: ""
node_id: hub-1
admin: {addr: $NET.1:7409}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $QUEUE_SECRET}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
YAML
cat >"$work/herd.yaml" <<YAML
name: queue-herd
duration: 120s
population: {devices: $N, initial: $N, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, count: 1, headroom: 2, max_new_per_second: 1}]
client:
  backoff: {policy: full, base: 300ms, cap: 1s}
  connect_timeout: 30s
traffic:
  disconnects: [{at: 2s, share: 1}]
stop: {on_recovery: true}
YAML

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), N $N, agents $AGENTS, net.core.somaxconn $(sysctl -n net.core.somaxconn) (a network namespace of its own)"
"$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
hub=$!
for _ in $(seq 300); do curl -sf "http://$NET.1:7409/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
(
	while :; do
		opened=$(curl -s "http://$NET.1:7409/metrics" | awk '/^corral_hub_sessions_opened_total/ {s += $2} END {print s + 0}')
		queue=$(ss -lnt "sport = :7400" | awk 'NR == 2 {print $2}')
		rss=$(ps -eo rss=,args= | awk '/kraken agent/ && !/awk/ {printf " %d", $1}')
		echo "$(date +%s.%N) $opened ${queue:-0} $(counter netstat TcpExt ListenOverflows) $(counter netstat TcpExt TCPSynRetrans) $(counter snmp Tcp ActiveOpens)$rss"
		sleep 0.1
	done
) >"$work/samples" 2>/dev/null &
sampler=$!
o0=$(counter netstat TcpExt ListenOverflows) s0=$(counter netstat TcpExt TCPSynRetrans)
"$work/corral" kraken run "$work/herd.yaml" --target "ws://$NET.1:7400/v1/ws" --agents "$AGENTS" \
	--secret-env QUEUE_SECRET --out "$work/herd.json" 2>"$work/kraken.log" || { cat "$work/kraken.log" >&2; exit 1; }
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
echo "    t  opened  queue  overflows  synretrans  connects  agents' RSS (KiB)"
awk 'NR == 1 { t0 = $1 }
	NR > 1 {
		d = $2 - po; o = $4 - pov; r = $5 - psr; c = $6 - pao
		if (d > 0 || o > 0 || r > 0 || c > 2 || last) {
			printf "%5.2f  %6d  %5d  %9d  %10d  %8d ", $1 - t0, d, $3, o, r, c
			for (i = 7; i <= NF; i++) printf " %d", $i
			printf "\n"
		}
		last = d > 0
	}
	{ po = $2; pov = $4; psr = $5; pao = $6 }' "$work/samples"
echo "kernel over the run (warm-up included): $(($(counter netstat TcpExt ListenOverflows) - o0)) listen overflows, $(($(counter netstat TcpExt TCPSynRetrans) - s0)) SYN retransmissions"
sed -n 's/^kraken: \(warm-up of .*\)$/kraken: \1/p' "$work/kraken.log"
jq -r '"kraken: connect latency p50 \(.latency.connect.p50_ms) ms, p99 \(.latency.connect.p99_ms) ms; held per second \(.held_per_second)"' "$work/herd.json"
kill "$hub" 2>/dev/null || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
