#!/usr/bin/env bash
# bench/edge/run.sh: the edge benchmarks of issue 12, on one machine.
#
#   bash bench/edge/run.sh [idle|latency|storm|all] [-n 9000] [-runs 3]
#
# idle:    N idle WebSocket sessions (Hello + one Subscribe each) held
#          through a front in front of one hub, the client side in two
#          processes over 127.2.0.0/15 sources. The front is, in turns in
#          the same run, `corral edge` (one socket per device, the sessions
#          multiplexed upstream over Relay streams) and HAProxy (Debian's,
#          `mode http`, one socket to the device and one to the hub per
#          session). Reports the front's RSS per session (minus its own
#          before the sessions); for the edge also its Go heap per session.
#          N is at most ~9,500: HAProxy holds two descriptors per session
#          and a process may hold 20,000 here. EDGE_HEAP_PROFILE=FILE saves
#          the edge's heap profile once the sessions are held (with
#          EDGE_GODEBUG=memprofilerate=1 it records every allocation).
#          TLS=1: the devices' sessions are wss, terminated by the edge
#          (its tls, internal/wsserve's TLS) and by HAProxy (bind ... ssl),
#          from one self-signed ECDSA P-256 certificate (openssl); the hop
#          to the hub stays plaintext on both.
# latency: N subscribers of one channel, first straight on the hub, then
#          through the edge, in turns; the hub's HTTP publish API sends
#          MESSAGES messages EVERY apart (default 200 at 50ms: 20 per
#          second); p50 and p99 from publish to receipt over every
#          delivery, and the edge's added p50 and p99 beside the direct
#          ones.
# storm:   N sessions (default 20,000; priorities P0 10 %, P1 30 %, P2 60 %)
#          through 2 edges (`corral edge` on 127.0.2.1 and 127.0.2.2,
#          admission on: adaptive limits, staged shedding by priority) to 3
#          hubs (`corral hub` on 127.0.1.1-3, the first one's NATS server
#          embedded and listening, the two others joined to it), driven by
#          `corral kraken run` over its agent processes (one per 18,000
#          devices; STORM_ADMISSION=false turns the edges' admission off,
#          STORM_HUB_OVERLOAD=false the hubs', for comparison). The sessions are held STORM_HOLD (20s), all dropped at
#          once, and reconnect with full jitter (STORM_BACKOFF, default
#          {policy: full, base: 1s, cap: 30s}). Reports the time until 99 %
#          are back against the ideal, N / the fleet's admission rate
#          (the peak: the largest rise of the sessions held over any 3 s
#          after the drop, or over all of it when the fleet is back
#          sooner; the warm-up's rate, every device connecting at
#          once, is printed beside it), the ratio (issue 12's target:
#          <= 1.5x), and each priority's time until 99 % of its dropped
#          devices were back (P0 should be first). Each run on fresh
#          processes; -runs times. STORM_KEEP=DIR keeps each run's edge
#          logs and kraken's JSON result there.
#
# Needs: Go, curl, haproxy (installed with apt-get when missing, for idle),
# openssl with TLS=1, jq for storm.
set -euo pipefail
cd "$(dirname "$0")/../.."

mode=${1:-all}
shift || true
N=""
RUNS=3
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-runs) RUNS=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
if [ -z "$N" ]; then
	N=9000
	[ "$mode" = storm ] && N=20000
fi
if [ "${TLS:-0}" = 1 ] && [ "$mode" != idle ]; then
	echo "TLS=1 is for idle only (the latency turns' direct path is the plaintext hub)" >&2; exit 2
fi
MESSAGES=${MESSAGES:-200}
EVERY=${EVERY:-50ms}

work=$(mktemp -d /tmp/corral-bench-edge.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral
go build -o "$work/hubload" ./bench/hub/hubload

SECRET=bench-secret-0123456789abcdef
KEY=bench-api-key-0123456789
RELAY=bench-relay-key-0123456789
HUB=127.0.0.1:7450
HUB_GRPC=127.0.0.1:7451
HUB_ADMIN=127.0.0.1:7459
EDGE=127.0.0.1:7470
EDGE_ADMIN=127.0.0.1:7479
HAPROXY=127.0.0.1:7480
cat >"$work/hub.yaml" <<YAML
listen: $HUB
grpc_listen: $HUB_GRPC
admin: {addr: $HUB_ADMIN}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $SECRET}]
  api_keys: [{name: bench, key: $KEY, tenants: ["*"]}]
relay:
  keys: [{name: bench, key: $RELAY}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
YAML
cat >"$work/edge.yaml" <<YAML
listen: $EDGE
grpc_listen: ""
admin: {addr: $EDGE_ADMIN}
origins:
  static: ["$HUB_GRPC"]
relay:
  key: $RELAY
session:
  handshake_timeout: 60s
  ping_interval: 10m
YAML
TLS=${TLS:-0}
CLIENT_TLS=""
HAPROXY_SSL=""
if [ "$TLS" = 1 ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench.corral.test \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
	cat "$work/cert.pem" "$work/key.pem" >"$work/haproxy.pem"
	printf 'tls: {cert_file: %s, key_file: %s}\n' "$work/cert.pem" "$work/key.pem" >>"$work/edge.yaml"
	CLIENT_TLS=-tls
	HAPROXY_SSL=" ssl crt $work/haproxy.pem ssl-min-ver TLSv1.3 alpn http/1.1"
fi
cat >"$work/haproxy.cfg" <<CFG
global
  maxconn 9800
defaults
  mode http
  timeout connect 5s
  timeout client 1h
  timeout server 1h
  timeout tunnel 1h
frontend devices
  bind $HAPROXY$HAPROXY_SSL
  default_backend hub
backend hub
  server hub1 $HUB
CFG
TOKEN=$("$work/hubload" token -secret "$SECRET" -tenant bench)

metric() { curl -s "http://$1/metrics" | awk -v m="$2" '$1 == m || index($1, m"{") == 1 {s += $2} END {printf "%.0f\n", s}'; }
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
wait_ready() {
	for _ in $(seq 200); do
		curl -sf "http://$1/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$1 not ready" >&2; return 1
}
wait_line() { # FILE PATTERN
	for _ in $(seq 1200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "timeout waiting for $2 in $1" >&2; cat "$1" >&2; return 1
}
# start_clients ADDR COUNT FIRST LATFILE: a hubload client process fed by a
# FIFO (closing it ends the process).
start_clients() {
	local addr=$1 n=$2 first=$3 lat=$4 fifo="$work/in.$3"
	rm -f "$fifo"; mkfifo "$fifo"
	"$work/hubload" clients $CLIENT_TLS -addr "$addr" -n "$n" -first "$first" -token "$TOKEN" -channel bench -lat "$lat" <"$fifo" >"$work/out.$first" 2>&1 &
	exec {fd}>"$fifo"
	eval "fd_$first=$fd"
}
stop_clients() {
	local first fdn
	for first in "$@"; do
		eval "fdn=\$fd_$first"
		eval "exec $fdn>&-"
	done
	for first in "$@"; do wait_line "$work/out.$first" '^received'; done
}
start_hub() {
	"$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
	hub_pid=$!
	wait_ready "$HUB_ADMIN"
}
start_edge() {
	GODEBUG=${EDGE_GODEBUG:-} "$work/corral" edge --config "$work/edge.yaml" --log-level warn >"$work/edge.log" 2>&1 &
	front_pid=$!
	wait_ready "$EDGE_ADMIN"
}
start_haproxy() {
	haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
	front_pid=$!
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/${HAPROXY%:*}/${HAPROXY#*:}") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "haproxy did not start" >&2; cat "$work/haproxy.log" >&2; return 1
}
# median_of NAME COLUMN FILE: the median of COLUMN over FILE's lines whose
# first field is NAME.
median_of() { awk -v f="$1" -v c="$2" '$1 == f {print $c}' "$3" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
stop() { kill -TERM "$@" 2>/dev/null || true; wait "$@" 2>/dev/null || true; }

# idle_turn FRONT RUN: N sessions held through FRONT (edge or haproxy).
idle_turn() {
	local front=$1 run=$2 addr half=$(( N / 2 ))
	start_hub
	if [ "$front" = edge ]; then start_edge; addr=$EDGE; else start_haproxy; addr=$HAPROXY; fi
	sleep 1
	local rss0 heap0=0
	rss0=$(rss "$front_pid")
	[ "$front" = edge ] && heap0=$(metric "$EDGE_ADMIN" go_memstats_heap_inuse_bytes)
	start_clients "$addr" "$half" 0 /dev/null
	start_clients "$addr" $(( N - half )) 100000 /dev/null
	wait_line "$work/out.0" '^ready'; wait_line "$work/out.100000" '^ready'
	for _ in $(seq 300); do [ "$(metric "$HUB_ADMIN" corral_hub_sessions)" -ge "$N" ] && break; sleep 0.1; done
	# Settle, then collect, and give the Go runtime's scavenger time to
	# return freed pages (the edge's RSS falls after the connection storm).
	sleep 5
	[ "$front" = edge ] && curl -s "http://$EDGE_ADMIN/debug/pprof/heap?gc=1" >/dev/null
	sleep "${SETTLE:-20}"
	[ "$front" = edge ] && curl -s "http://$EDGE_ADMIN/debug/pprof/heap?gc=1" >/dev/null
	sleep 2
	if [ "$front" = edge ] && [ -n "${EDGE_HEAP_PROFILE:-}" ]; then curl -s "http://$EDGE_ADMIN/debug/pprof/heap" >"$EDGE_HEAP_PROFILE"; fi
	local rss1 sessions heap=""
	rss1=$(rss "$front_pid"); sessions=$(metric "$HUB_ADMIN" corral_hub_sessions)
	if [ "$front" = edge ]; then
		heap=" heap_per_session $(( ($(metric "$EDGE_ADMIN" go_memstats_heap_inuse_bytes) - heap0) / sessions )) goroutines $(metric "$EDGE_ADMIN" go_goroutines) stack_inuse $(metric "$EDGE_ADMIN" go_memstats_stack_inuse_bytes)"
	fi
	echo "idle $front run $run: sessions $sessions rss_before $rss0 rss_after $rss1 rss_per_session $(( (rss1 - rss0) / sessions ))$heap"
	echo "$front $(( (rss1 - rss0) / sessions ))" >>"$work/idle.sum"
	stop_clients 0 100000
	stop "$front_pid"
	stop "$hub_pid"
}

# latency_turn PATH RUN: N subscribers direct on the hub or through the
# edge; MESSAGES publishes on the hub.
latency_turn() {
	local path=$1 run=$2 addr=$HUB half=$(( N / 2 ))
	start_hub
	if [ "$path" = edge ]; then start_edge; addr=$EDGE; fi
	rm -f "$work/lat.0" "$work/lat.100000"
	start_clients "$addr" "$half" 0 "$work/lat.0"
	start_clients "$addr" $(( N - half )) 100000 "$work/lat.100000"
	wait_line "$work/out.0" '^ready'; wait_line "$work/out.100000" '^ready'
	sleep 1
	"$work/hubload" publish -addr "$HUB" -key "$KEY" -tenant bench -channel bench -count "$MESSAGES" -every "$EVERY" >/dev/null
	sleep 2
	stop_clients 0 100000
	local line
	line=$("$work/hubload" merge "$work/lat.0" "$work/lat.100000")
	echo "latency $path run $run: $line (subscribers $N, $MESSAGES messages every $EVERY)"
	echo "$path $line" >>"$work/latency.sum"
	[ "$path" = edge ] && stop "$front_pid"
	stop "$hub_pid"
}

# storm_turn RUN: N sessions through 2 edges to 3 hubs, all dropped at
# once; the time until 99 % are back against N / the admission rate.
storm_turn() {
	local run=$1 i pids=() hold=${STORM_HOLD:-20s} backoff=${STORM_BACKOFF:-"{policy: full, base: 1s, cap: 30s}"}
	for i in 1 2 3; do
		local nats="url: nats://127.0.1.1:7440"
		[ "$i" = 1 ] && nats="listen: 127.0.1.1:7440"
		cat >"$work/shub$i.yaml" <<YAML
listen: 127.0.1.$i:7450
grpc_listen: 127.0.1.$i:7451
node_id: hub-$i
admin: {addr: 127.0.1.$i:7459}
nats: {$nats}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $SECRET}]
relay:
  keys: [{name: bench, key: $RELAY}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
overload:
  enabled: ${STORM_HUB_OVERLOAD:-true}
YAML
		"$work/corral" hub --config "$work/shub$i.yaml" --log-level warn >"$work/shub$i.log" 2>&1 &
		pids+=($!)
		wait_ready "127.0.1.$i:7459"
	done
	for i in 1 2; do
		cat >"$work/sedge$i.yaml" <<YAML
listen: 127.0.2.$i:7470
grpc_listen: ""
node_id: edge-$i
admin: {addr: 127.0.2.$i:7479}
origins:
  static: ["127.0.1.1:7451", "127.0.1.2:7451", "127.0.1.3:7451"]
  pick: p2c
relay:
  key: $RELAY
session:
  handshake_timeout: 60s
  ping_interval: 10m
admission:
  enabled: ${STORM_ADMISSION:-true}
YAML
		"$work/corral" edge --config "$work/sedge$i.yaml" --log-level "${STORM_EDGE_LOG:-warn}" >"$work/sedge$i.log" 2>&1 &
		pids+=($!)
		wait_ready "127.0.2.$i:7479"
	done
	local hold_s=${hold%s}
	cat >"$work/storm.yaml" <<YAML
name: edge-storm
duration: $(( hold_s + ${STORM_RECOVER:-300} ))s
population:
  devices: $N
  initial: $N
  protocol: websocket
  priorities: [{name: P0, share: 0.1}, {name: P1, share: 0.3}, {name: P2, share: 0.6}]
dns: {policy: multivalue}
origins: [{name: hub, count: 3, headroom: 1, max_new_per_second: 100000}]
client:
  backoff: $backoff
  connect_timeout: 30s
traffic:
  disconnects: [{at: ${hold_s}s, share: 1}]
stop: {on_recovery: true}
target:
  urls: ["ws://127.0.2.1:7470/v1/ws", "ws://127.0.2.2:7470/v1/ws"]
YAML
	export KRAKEN_BENCH_SECRET=$SECRET
	"$work/corral" kraken run "$work/storm.yaml" --secret-env KRAKEN_BENCH_SECRET ${STORM_AGENTS:+--agents $STORM_AGENTS} \
		--out "$work/storm.$run.json" 2>"$work/kraken.$run.log" || { tail -20 "$work/kraken.$run.log" >&2; stop "${pids[@]}"; return 1; }
	local r="$work/storm.$run.json" wu
	if [ -n "${STORM_KEEP:-}" ]; then
		# (a missing directory stopped the script here without a word)
		mkdir -p "$STORM_KEEP"
		cp "$work"/sedge*.log "$work/storm.$run.json" "$STORM_KEEP/" || echo "STORM_KEEP: could not copy run $run's files to $STORM_KEEP" >&2
	fi
	# The warm-up as the coordinator measured it (every agent ready to
	# every session held): the fleet's admission rate under a herd.
	wu=$(sed -n 's/^kraken: warm-up of .* took \([0-9.]*\)s$/\1/p' "$work/kraken.$run.log")
	[ -n "$wu" ] || { echo "no warm-up line in kraken's log (a run in one process: give STORM_AGENTS=2)" >&2; stop "${pids[@]}"; return 1; }
	# Two admission rates: the warm-up's (N over the time from every agent
	# ready to every session held: a herd itself, and its tail is the
	# backoff's) and the peak, the largest rise of the sessions held over
	# any 3 s after the drop (over the whole series after it when the run
	# ended sooner: a fleet back within 3 s): the rate the fleet was seen
	# to admit at, which makes the stricter ideal. The ratio is against
	# the peak.
	jq -r --argjson n "$N" --argjson wu "$wu" --arg run "$run" --argjson drop "$hold_s" '
		.storms[0] as $s | .held_per_second as $h |
		([3, ($h | length) - 1 - $drop] | min) as $w |
		(if $w < 1 then 0 else [range($drop; ($h | length) - $w)] | map(($h[. + $w] - $h[.]) / $w) | max // 0 end) as $peak |
		($n / $wu) as $wurate | (if $peak > 0 then $n / $peak else 0 end) as $ideal | $peak as $rate |
		def p99(p): if ($s.back_after_by_priority[p].count // 0) == ($s.dropped_by_priority[p] // 0) and ($s.dropped_by_priority[p] // 0) > 0
			then "\($s.back_after_by_priority[p].p99_ms / 1000 | . * 100 | round / 100) s" else "not all back" end;
		"storm run \($run): \(.agents) agents, \($s.dropped) dropped, \($s.back) back; admission \($wurate | round)/s at the warm-up (\($wu) s), peak \($rate | round)/s after the drop; ideal N / peak \($ideal * 100 | round / 100) s; 99 % back after \(if $s.back_99_ms then ($s.back_99_ms / 1000 * 100 | round / 100 | tostring) + " s" else "never" end) = \(if $s.back_99_ms then ($s.back_99_ms / 1000 / $ideal * 100 | round / 100 | tostring) + "x" else "-" end) ideal (from the start of the storm \(if $s.since_99_ms then ($s.since_99_ms / 1000 * 100 | round / 100 | tostring) + " s = " + ($s.since_99_ms / 1000 / $ideal * 100 | round / 100 | tostring) + "x" else "never" end)); 99 % of each back: P0 \(p99("p0")), P1 \(p99("p1")), P2 \(p99("p2")); peak \(.peak_attempts_per_second) attempts/s, \(.attempts_per_device * 100 | round / 100) attempts per device"' "$r"
	jq -c '{failures: (.failures | map_values(add)), disconnects: (.disconnects | map_values(add)), terminal, welcomes: (.welcomes | map_values(add)), stopped}' "$r" | sed 's/^/  /'
	stop "${pids[@]}"
}

echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), N $N, TLS $TLS"
if [ "$mode" = idle ] || [ "$mode" = all ]; then
	if ! command -v haproxy >/dev/null; then
		sudo=""; [ "$(id -u)" != 0 ] && sudo=sudo
		$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq haproxy >/dev/null
	fi
	echo "# $(haproxy -v | head -1)"
	for r in $(seq "$RUNS"); do idle_turn edge "$r"; idle_turn haproxy "$r"; done
	e=$(median_of edge 2 "$work/idle.sum"); h=$(median_of haproxy 2 "$work/idle.sum")
	echo "idle medians over $RUNS runs: edge $e B per session, haproxy $h B per session, edge / haproxy $(awk -v e="$e" -v h="$h" 'BEGIN {printf "%.2f", e / h}')"
fi
if [ "$mode" = latency ] || [ "$mode" = all ]; then
	for r in $(seq "$RUNS"); do latency_turn direct "$r"; latency_turn edge "$r"; done
	# lines: PATH deliveries D p50_ms P p99_ms Q max_ms M
	d50=$(median_of direct 5 "$work/latency.sum"); d99=$(median_of direct 7 "$work/latency.sum")
	e50=$(median_of edge 5 "$work/latency.sum"); e99=$(median_of edge 7 "$work/latency.sum")
	echo "latency medians over $RUNS runs: direct p50 $d50 ms p99 $d99 ms; edge p50 $e50 ms p99 $e99 ms; added p50 $(awk -v a="$e50" -v b="$d50" 'BEGIN {printf "%.2f", a - b}') ms, p99 $(awk -v a="$e99" -v b="$d99" 'BEGIN {printf "%.2f", a - b}') ms"
fi
if [ "$mode" = storm ]; then
	command -v jq >/dev/null || { echo "storm needs jq" >&2; exit 2; }
	for r in $(seq "$RUNS"); do storm_turn "$r"; done
fi
