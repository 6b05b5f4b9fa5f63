#!/usr/bin/env bash
# bench/hub/run.sh: the hub benchmarks of issue 6, on one machine.
#
#   bash bench/hub/run.sh [idle|upgrades|all] [-n 19000] [-runs 3]
#
# idle:     19,000 idle WebSocket sessions (Hello + one Subscribe each) on one
#           hub process; client side in two other processes spread over
#           127.2.0.0/15 sources. Reports the hub's RSS and Go heap per
#           session (minus the hub's own before the sessions), then the
#           fan-out of one message to every session (20 messages, 500 ms
#           apart: deliveries and p50/p99 latency from publish to receipt).
#           HUB_GOMEMLIMIT=80MiB runs the hub with that soft memory limit
#           (the runtime then returns freed pages to the OS sooner).
# upgrades: the hub pinned to CPU 0 with GOMAXPROCS=1, clients on CPU 1:
#           sessions per second from TCP connect to Welcome (handshake,
#           Hello, token check, Welcome), with and without a Subscribe.
#
# Needs: Go, taskset (util-linux), curl. The per-process fd limit here is
# 20,000: the hub holds the 19,000 sessions, each client process 9,500.
set -euo pipefail
cd "$(dirname "$0")/../.."

mode=${1:-all}
shift || true
N=19000
RUNS=3
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-runs) RUNS=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d /tmp/corral-bench-hub.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral
go build -o "$work/hubload" ./bench/hub/hubload

SECRET=bench-secret-0123456789abcdef
KEY=bench-api-key-0123456789
ADDR=127.0.0.1:7450
ADMIN=127.0.0.1:7459
cat >"$work/hub.yaml" <<YAML
listen: $ADDR
grpc_listen: ""
admin: {addr: $ADMIN}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $SECRET}]
  api_keys: [{name: bench, key: $KEY, tenants: ["*"]}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
YAML
TOKEN=$("$work/hubload" token -secret "$SECRET" -tenant bench)

metric() { curl -s "http://$ADMIN/metrics" | awk -v m="$1" '$1 == m || index($1, m"{") == 1 {s += $2} END {printf "%.0f\n", s}'; }
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
# netdrops: packets the kernel dropped from its per-CPU input backlog (the
# loopback path goes through it; above net.core.netdev_max_backlog queued
# packets it drops), machine-wide; then TCP retransmitted segments and
# retransmission timeouts of this network namespace.
netdrops() {
	local drops
	drops=$(while read -r _ d _; do echo $((16#$d)); done </proc/net/softnet_stat | awk '{s += $1} END {print s}')
	awk -v d="$drops" '/^Tcp: / && $2 ~ /^[0-9]+$/ {r = $13} /^TcpExt: / {if ($2 ~ /^[0-9]+$/) {for (i = 2; i <= NF; i++) x[i] = $i} else {for (i = 2; i <= NF; i++) n[i] = $i}} END {for (i in n) if (n[i] == "TCPTimeouts") t = x[i]; print d, r, t}' /proc/net/snmp /proc/net/netstat
}
wait_ready() {
	for _ in $(seq 200); do
		curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "hub not ready" >&2; return 1
}

# start_clients COUNT FIRST CHANNEL LATFILE [taskset-cpu]: a client process
# fed by a FIFO (closing it ends the process); prints its ready line.
start_clients() {
	local n=$1 first=$2 ch=$3 lat=$4 cpu=${5:-}
	local fifo="$work/in.$first"
	rm -f "$fifo"; mkfifo "$fifo"
	local pre=()
	[ -n "$cpu" ] && pre=(taskset -c "$cpu")
	"${pre[@]}" "$work/hubload" clients -addr "$ADDR" -n "$n" -first "$first" -token "$TOKEN" -channel "$ch" -lat "$lat" <"$fifo" >"$work/out.$first" 2>&1 &
	exec {fd}>"$fifo"
	eval "fd_$first=$fd"
}
stop_clients() {
	local first
	for first in "$@"; do
		local fdn
		eval "fdn=\$fd_$first"
		eval "exec $fdn>&-"
	done
	wait $(jobs -p | tail -n +2) 2>/dev/null || true
}
wait_line() { # FILE PATTERN
	for _ in $(seq 1200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "timeout waiting for $2 in $1" >&2; cat "$1" >&2; return 1
}

idle_run() {
	local run=$1 half=$(( N / 2 ))
	GOMEMLIMIT=${HUB_GOMEMLIMIT:-off} "$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
	local hub=$!
	wait_ready
	sleep 1
	local rss0 heap0
	rss0=$(rss $hub); heap0=$(metric go_memstats_heap_inuse_bytes)
	start_clients "$half" 0 bench "$work/lat.0"
	start_clients $(( N - half )) 100000 bench "$work/lat.1"
	wait_line "$work/out.0" '^ready'; wait_line "$work/out.100000" '^ready'
	for _ in $(seq 300); do [ "$(metric corral_hub_sessions)" -ge "$N" ] && break; sleep 0.1; done
	# Settle: collect, then give the runtime's scavenger time to return
	# freed pages (RSS falls for a while after the connection storm).
	sleep 5
	curl -s "http://$ADMIN/debug/pprof/heap?gc=1" >/dev/null
	sleep "${SETTLE:-20}"
	curl -s "http://$ADMIN/debug/pprof/heap?gc=1" >/dev/null
	sleep 2
	[ -n "${PROFILE:-}" ] && curl -s "http://$ADMIN/debug/pprof/heap" >"$PROFILE"
	local rss1 heap1 sessions gor
	rss1=$(rss $hub); heap1=$(metric go_memstats_heap_inuse_bytes); sessions=$(metric corral_hub_sessions); gor=$(metric go_goroutines)
	echo "idle run $run: sessions $sessions goroutines $gor rss_before $rss0 rss_after $rss1 rss_per_session $(( (rss1 - rss0) / sessions )) heap_per_session $(( (heap1 - heap0) / sessions ))"
	local net0 net1
	net0=$(netdrops)
	"$work/hubload" publish -addr "$ADDR" -key "$KEY" -tenant bench -channel bench -count 20 -every 500ms
	sleep "${FANOUT_WAIT:-2}"
	net1=$(netdrops)
	stop_clients 0 100000
	echo "fanout run $run: $("$work/hubload" merge "$work/lat.0" "$work/lat.1") (messages 20, subscribers $sessions)"
	echo "$net0 $net1" | awk -v run="$run" '{printf "fanout run %s kernel: backlog drops %d (machine-wide), tcp retransmits %d, retransmission timeouts %d\n", run, $4 - $1, $5 - $2, $6 - $3}'
	if [ -n "${PER_MESSAGE:-}" ]; then "$work/hubload" merge -v "$work/lat.0" "$work/lat.1" | grep '^message'; fi
	kill -TERM $hub; wait $hub 2>/dev/null || true
}

upgrades_run() {
	local run=$1 ch=$2 half=$(( N / 2 ))
	GOMAXPROCS=1 taskset -c 0 "$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
	local hub=$!
	wait_ready
	start_clients "$half" 0 "$ch" /dev/null 1
	start_clients $(( N - half )) 100000 "$ch" /dev/null 1
	wait_line "$work/out.0" '^ready'; wait_line "$work/out.100000" '^ready'
	local a b
	a=$(awk '/^ready/ {print $2, $6}' "$work/out.0"); b=$(awk '/^ready/ {print $2, $6}' "$work/out.100000")
	# Both clients ran at once: the rate is all sessions over the longer time.
	echo "$a $b" | awk -v run="$run" -v ch="${ch:-none}" '{t = ($2 > $4 ? $2 : $4); printf "upgrades run %s (subscribe: %s): sessions %d in %d ms: %.0f sessions/s on one core\n", run, ch, $1 + $3, t, ($1 + $3) / (t / 1000)}'
	stop_clients 0 100000
	kill -TERM $hub; wait $hub 2>/dev/null || true
}

echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$mode" = idle ] || [ "$mode" = all ]; then
	for r in $(seq "$RUNS"); do idle_run "$r"; done
fi
if [ "$mode" = upgrades ] || [ "$mode" = all ]; then
	for r in $(seq "$RUNS"); do upgrades_run "$r" ""; upgrades_run "$r" bench; done
fi
