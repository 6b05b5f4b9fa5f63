#!/usr/bin/env bash
# bench/kraken/storm.sh: 100,000 concurrent WebSocket sessions on one
# machine, held, all dropped at once, and taken back (issue 14).
#
#   bash bench/kraken/storm.sh [-n 100000] [-hubs 6] [-agents 0] [-hold 60s]
#                              [-recover 300s] [-policies "full none"]
#
# -hubs hub processes (memory history, pings every 10 min, overload on as
# shipped: the staged shedder on heap and descriptors, the publish limiter) on
# 127.0.1.1 .. 127.0.1.H, port 7400; `corral kraken run` splits the N
# devices over its agent processes (-agents, 0: one per 18,000 devices;
# each device on its own source address of 127.64.0.0/10). For each
# backoff policy of -policies (full: full jitter, FULL; none: retry at
# once, NONE), on fresh hubs:
#
#   1. every device connects at once (kraken's warm-up): the connect rate
#      is N / the warm-up's time (from every agent ready to every session
#      held, as the coordinator prints it);
#   2. the sessions are held for -hold; in the middle of it the RSS of
#      every hub and every kraken agent is read from /proc: RSS per session
#      on both sides (the hubs' less their RSS before, kraken's agents'
#      less a one-device kraken process's each);
#   3. every session is dropped at once (share 1); the devices reconnect
#      by the policy until all are back (or -recover passes): the time
#      until 99 % and 100 % are back, the peak attempts per second, the
#      attempts per device, beside the ideal N / admission rate, the
#      admission rate being the connect rate measured in 1.
#
# The per-process file limit here is 20,000: N / hubs and N / agents must
# stay below it (the defaults hold 16,667 each). Needs Go, curl, jq, pgrep, and
# about 1.5 GiB of memory at N = 100,000. No figure is meaningful on a
# loaded machine: run it on a quiet one. A check at small scale:
#   bash bench/kraken/storm.sh -n 300 -hubs 2 -agents 2 -hold 4s -recover 30s
set -euo pipefail
cd "$(dirname "$0")/../.."

N=100000
HUBS=6
AGENTS=0
HOLD=60s
RECOVER=300s
POLICIES="full none"
FULL=${FULL:-"{policy: full, base: 1s, cap: 60s}"}
NONE=${NONE:-"{policy: none, base: 0s}"}
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-hubs) HUBS=$2; shift 2 ;;
	-agents) AGENTS=$2; shift 2 ;;
	-hold) HOLD=$2; shift 2 ;;
	-recover) RECOVER=$2; shift 2 ;;
	-policies) POLICIES=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
secs() { case "$1" in *ms) awk -v v="${1%ms}" 'BEGIN {print v / 1000}' ;; *s) echo "${1%s}" ;; *m) echo $(( ${1%m} * 60 )) ;; *) echo "$1" ;; esac; }
HOLD_S=$(secs "$HOLD")
RECOVER_S=$(secs "$RECOVER")

work=$(mktemp -d /tmp/corral-bench-kstorm.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral
export KRAKEN_BENCH_SECRET=bench-secret-0123456789abcdef

rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }
wait_ready() {
	for _ in $(seq 300); do
		curl -sf "http://$1/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$1 not ready" >&2; return 1
}
now() { date +%s.%N; }

hub_pids=()
start_hubs() {
	hub_pids=()
	for i in $(seq "$HUBS"); do
		cat >"$work/hub$i.yaml" <<YAML
listen: 127.0.1.$i:7400
grpc_listen: ""
node_id: hub-$i
admin: {addr: 127.0.1.$i:7409}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $KRAKEN_BENCH_SECRET}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
overload:
  enabled: true
YAML
		"$work/corral" hub --config "$work/hub$i.yaml" --log-level warn >"$work/hub$i.log" 2>&1 &
		hub_pids+=($!)
	done
	for i in $(seq "$HUBS"); do wait_ready "127.0.1.$i:7409"; done
}
stop_hubs() { kill -TERM "${hub_pids[@]}" 2>/dev/null || true; wait "${hub_pids[@]}" 2>/dev/null || true; }
hubs_rss() { local s=0 p; for p in "${hub_pids[@]}"; do s=$(( s + $(rss "$p") )); done; echo "$s"; }
targets() { local i; for i in $(seq "$HUBS"); do printf -- '--target ws://127.0.1.%d:7400/v1/ws ' "$i"; done; }

# The RSS of a kraken process holding one session: the base each agent's
# RSS is measured against.
start_hubs
cat >"$work/one.yaml" <<YAML
name: one
duration: 5s
population: {devices: 1, initial: 1, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 1, max_new_per_second: 100000}]
YAML
# shellcheck disable=SC2046
"$work/corral" kraken run "$work/one.yaml" $(targets) --agents 1 --secret-env KRAKEN_BENCH_SECRET --out "$work/one.json" 2>"$work/one.log" &
k=$!
for _ in $(seq 100); do grep -q 't=.* held 1/1 ' "$work/one.log" 2>/dev/null && break; sleep 0.1; done
sleep 1
K1=$(rss "$k")
wait "$k"
stop_hubs

echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), N $N, hubs $HUBS, hold $HOLD"
for policy in $POLICIES; do
	case "$policy" in
	full) bo=$FULL ;;
	none) bo=$NONE ;;
	*) echo "unknown policy $policy (want full or none)" >&2; exit 2 ;;
	esac
	start_hubs
	sleep 1
	hub0=$(hubs_rss)
	cat >"$work/storm.yaml" <<YAML
name: storm-$policy
duration: $(awk -v a="$HOLD_S" -v b="$RECOVER_S" 'BEGIN {print a + b}')s
population: {devices: $N, initial: $N, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, count: $HUBS, headroom: 1, max_new_per_second: 100000}]
client:
  backoff: $bo
  connect_timeout: 30s
traffic:
  disconnects: [{at: ${HOLD_S}s, share: 1}]
stop: {on_recovery: true}
YAML
	start=$(now)
	# shellcheck disable=SC2046
	"$work/corral" kraken run "$work/storm.yaml" $(targets) --agents "$AGENTS" --secret-env KRAKEN_BENCH_SECRET \
		--out "$work/storm-$policy.json" 2>"$work/kraken-$policy.log" &
	k=$!
	warm=""
	for _ in $(seq 6000); do
		if grep -q 'kraken: t=' "$work/kraken-$policy.log" 2>/dev/null; then warm=$(now); break; fi
		kill -0 "$k" 2>/dev/null || { cat "$work/kraken-$policy.log" >&2; exit 1; }
		sleep 0.1
	done
	[ -n "$warm" ] || { echo "the warm-up did not end" >&2; exit 1; }
	sleep "$(awk -v a="$HOLD_S" 'BEGIN {print a / 2}')"
	hubn=$(hubs_rss)
	agents=$(pgrep -P "$k" || true)
	[ -n "$agents" ] || agents=$k # one agent: kraken ran in process
	na=0; ksum=0
	for p in $agents; do na=$(( na + 1 )); ksum=$(( ksum + $(rss "$p") )); done
	coord=$(rss "$k")
	wait "$k" || { cat "$work/kraken-$policy.log" >&2; exit 1; }
	r="$work/storm-$policy.json"
	jq -e '.storms[0].dropped > 0' "$r" >/dev/null || { echo "no drop in the result" >&2; cat "$r" >&2; exit 1; }
	# The coordinator's own measure of the warm-up (from every agent
	# ready to every session held), when the run was split.
	wu=$(sed -n 's/^kraken: warm-up of .* took \([0-9.]*\)s$/\1/p' "$work/kraken-$policy.log")
	[ -n "$wu" ] && start=$(awk -v w="$warm" -v d="$wu" 'BEGIN {printf "%.3f", w - d}')
	awk -v n="$N" -v s="$start" -v w="$warm" -v hb="$hub0" -v hn="$hubn" -v ks="$ksum" -v na="$na" -v k1="$K1" -v co="$coord" \
		-v p="$policy" -v bo="$bo" \
		-v b99="$(jq '.storms[0].back_99_ms // -1' "$r")" -v b100="$(jq '.storms[0].back_100_ms // -1' "$r")" \
		-v s99="$(jq '.storms[0].since_99_ms // -1' "$r")" -v s100="$(jq '.storms[0].since_100_ms // -1' "$r")" \
		-v dropped="$(jq '.storms[0].dropped' "$r")" -v back="$(jq '.storms[0].back' "$r")" \
		-v peak="$(jq '.peak_attempts_per_second' "$r")" -v apd="$(jq '.attempts_per_device' "$r")" \
		-v held="$(jq '.held' "$r")" -v nagents="$(jq '.agents' "$r")" 'BEGIN {
		rate = n / (w - s); ideal = n / rate
		printf "%s %s: %d agents, %d held at the end\n", p, bo, nagents, held
		printf "  connect: %d sessions in %.1f s: %.0f per second (the admission rate)\n", n, w - s, rate
		printf "  RSS per session: hubs %.2f KiB (%.0f MiB over %.0f before), kraken agents %.2f KiB (%.0f MiB in %d agents, less %.1f MiB each; coordinator %.0f MiB)\n",
			(hn - hb) / n / 1024, hn / 1048576, hb / 1048576, (ks - na * k1) / n / 1024, ks / 1048576, na, k1 / 1048576, (na > 1 ? co / 1048576 : 0)
		# -1: that share never came back within the run.
		t99 = b99 < 0 ? "never" : sprintf("%.1f s", b99 / 1000)
		t100 = b100 < 0 ? "never" : sprintf("%.1f s", b100 / 1000)
		x99 = b99 < 0 ? "-" : sprintf("%.2fx", b99 / 1000 / ideal)
		printf "  drop of %d: %d back; each from its own drop: 99 %% back after %s, 100 %% after %s; ideal N / rate %.1f s (99 %%: %s ideal)\n",
			dropped, back, t99, t100, ideal, x99
		# From the start of the storm: also the time kraken took to handle
		# the closes (kraken/README, since_X_ms).
		f99 = s99 < 0 ? "never" : sprintf("%.1f s", s99 / 1000)
		f100 = s100 < 0 ? "never" : sprintf("%.1f s", s100 / 1000)
		y99 = s99 < 0 ? "-" : sprintf("%.2fx", s99 / 1000 / ideal)
		printf "  from the start of the storm: 99 %% back after %s (%s ideal), 100 %% after %s\n", f99, y99, f100
		printf "  peak %d attempts per second, %.2f attempts per device\n", peak, apd
	}'
	stop_hubs
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
