#!/usr/bin/env bash
# bench/hub/run.sh: the hub benchmarks of issue 6, on one machine.
#
#   bash bench/hub/run.sh [idle|upgrades|versus|instructions|all] [-n 19000] [-runs 3] [-conc 500]
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
# versus:   the hub and Centrifugo side by side, in turns in the same run:
#           each pinned to CPU 0 with GOMAXPROCS=1, the same hubload client
#           on CPU 1 (two processes, -conc dials in flight in all), N
#           sessions per turn, each a TCP connect, upgrade, Hello (Centrifugo:
#           connect) with an HS256 token, Welcome, Subscribe, Subscribed;
#           both servers speak protobuf (CF_PROTOCOL=json: Centrifugo's JSON).
#           Per turn: sessions/s, the server's CPU utilisation and
#           CPU-seconds per 1,000 sessions (utime+stime from /proc/PID/stat
#           over the storm), median upgrade and Hello->Welcome times, the
#           clients' CPU and share of core 1, each core's idle and softirq
#           share, the same shares over the steady part (a tenth to nine
#           tenths of a client's sessions set up), and lost Hellos
#           (upgraded, Hello sent, no Welcome within 10 s); then the totals
#           of each server. The clients use hubload's epoll dialer
#           (HUBLOAD_DIALER=go: Go's net); HUB_GOMAXPROCS=2 gives the hub
#           two Ps on its core (a diagnostic). CENTRIFUGO=path/to/binary
#           (default: centrifugo on PATH or in $(go env GOPATH)/bin;
#           install: go install github.com/centrifugal/centrifugo/v6@v6.9.1).
#           HUB_CPUPROFILE=/tmp/hub.cpu.pb also saves a CPU profile of the
#           hub's first turn (HUB_CPUPROFILE_SECONDS, default 3, from the
#           start of the storm; its turn's CPU figure then includes pprof's).
#           HUB_SYSCALLS=1 also counts the system calls of each server over
#           its storm (perf stat on its tracepoints; needs perf and root or
#           perf_event_paranoid <= 1) and prints them per session: counts
#           that mean something on a busy machine too.
# instructions: the user-mode instructions per session set-up of each
#           server, counted by valgrind's callgrind (the machine's
#           hardware counters, perf stat -e instructions, are not there in
#           a VM without a PMU; callgrind counts every instruction the
#           process runs outside the kernel, whatever the load, so two
#           builds compare on a busy machine). Per server and run: the
#           server under callgrind with GOMAXPROCS=1 (GODEBUG
#           asyncpreemptoff=1: valgrind and Go's preemption signals), a
#           first storm of 300 sessions (closed again: threads, pools),
#           the counters zeroed, then N sessions (one hubload process,
#           -conc dials in flight; the same set-up as versus), dumped at
#           the client's ready line: instructions per session; then the
#           same with GOGC=off (the set-up path without the collector's
#           share, which depends on the heap), and the allocations and
#           bytes per session the server's runtime counted (the hub's
#           /metrics; Centrifugo's too). ONLY=hub or ONLY=centrifugo runs
#           one. System calls are not in these counts: HUB_SYSCALLS=1
#           with versus counts them. Needs valgrind. A turn of 6,000
#           sessions takes about half a minute a server under callgrind.
#
# Needs: Go, taskset (util-linux), curl. The per-process fd limit here is
# 20,000: the hub holds the 19,000 sessions, each client process 9,500.
set -euo pipefail
cd "$(dirname "$0")/../.."

mode=${1:-all}
shift || true
N=19000
RUNS=3
CONC=500
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-runs) RUNS=$2; shift 2 ;;
	-conc) CONC=$2; shift 2 ;;
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

# start_clients COUNT FIRST CHANNEL LATFILE [taskset-cpu [hubload flags...]]:
# a client process fed by a FIFO (closing it ends the process); prints its
# ready line.
start_clients() {
	local n=$1 first=$2 ch=$3 lat=$4 cpu=${5:-}
	shift 5 2>/dev/null || shift $#
	local fifo="$work/in.$first"
	rm -f "$fifo"; mkfifo "$fifo"
	local pre=()
	[ -n "$cpu" ] && pre=(taskset -c "$cpu")
	"${pre[@]}" "$work/hubload" clients -dialer "${HUBLOAD_DIALER:-epoll}" -addr "$ADDR" -n "$n" -first "$first" -token "$TOKEN" -channel "$ch" -lat "$lat" "$@" <"$fifo" >"$work/out.$first" 2>&1 &
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

# cputicks PID: user+system CPU of a process in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# coreticks: all, idle (with iowait) and softirq ticks of CPU 0 and CPU 1,
# machine-wide (/proc/stat).
coreticks() { awk '$1 == "cpu0" || $1 == "cpu1" {a = 0; for (i = 2; i <= 9; i++) a += $i; printf "%d %d %d ", a, $5 + $6, $8}' /proc/stat; }

# versus_turn SERVER RUN: one storm of N sessions against SERVER (hub or
# centrifugo) pinned to CPU 0 with GOMAXPROCS=1; appends a line to
# $work/versus.
versus_turn() {
	local srv=$1 run=$2 half=$(( N / 2 )) pid flags=()
	if [ "$srv" = hub ]; then
		GOMAXPROCS=${HUB_GOMAXPROCS:-1} taskset -c 0 "$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
		pid=$!
		wait_ready
	else
		GOMAXPROCS=1 taskset -c 0 "$CENTRIFUGO" --config "$work/centrifugo.json" >"$work/centrifugo.log" 2>&1 &
		pid=$!
		for _ in $(seq 200); do curl -sf "http://$CF_ADDR/health" >/dev/null 2>&1 && break; sleep 0.1; done
		flags=(-server centrifugo -centrifugo-protocol "${CF_PROTOCOL:-protobuf}" -addr "$CF_ADDR")
	fi
	sleep 1
	if [ -n "${HUB_SYSCALLS:-}" ]; then
		# perf stat -p counts the threads the server has when it attaches:
		# a first storm of 500 sessions (closed again) makes the ones the
		# storm needs, which a server otherwise starts during it.
		start_clients 500 200000 bench /dev/null 1 -conc 100 "${flags[@]}"
		wait_line "$work/out.200000" '^ready'
		stop_clients 200000
		sleep 1
	fi
	local c0 c1 s0 s1 prof=
	if [ "$srv" = hub ] && [ -n "${HUB_CPUPROFILE:-}" ] && [ "$run" = 1 ]; then
		curl -s "http://$ADMIN/debug/pprof/profile?seconds=${HUB_CPUPROFILE_SECONDS:-3}" >"$HUB_CPUPROFILE" &
		prof=$!
	fi
	local perf=
	if [ -n "${HUB_SYSCALLS:-}" ]; then
		perf stat -x, -e 'raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,context-switches' -p "$pid" -o "$work/perf.$srv" &
		perf=$!
	fi
	c0=$(cputicks $pid); s0=$(coreticks)
	start_clients "$half" 0 bench /dev/null 1 -conc $(( CONC / 2 )) -server-pid "$pid" "${flags[@]}"
	start_clients $(( N - half )) 100000 bench /dev/null 1 -conc $(( CONC - CONC / 2 )) -server-pid "$pid" "${flags[@]}"
	wait_line "$work/out.0" '^ready'; wait_line "$work/out.100000" '^ready'
	c1=$(cputicks $pid); s1=$(coreticks)
	# ready N failed F elapsed_ms E rate_per_s R lost_hellos L upgrade_p50_ms U welcome_p50_ms W subscribed_p50_ms S cpu_ms C ...
	# (C: the client process's own CPU at the end of its storm, getrusage;
	# its share of core 1 says whether the client, not the server, set the pace)
	cat "$work/out.0" "$work/out.100000" | awk -v srv="$srv" -v run="$run" -v ticks=$(( c1 - c0 )) -v hz="$(getconf CLK_TCK)" -v sum="$work/versus.sum" '
	/^ready/ { n += $2; failed += $4; if ($6 > e) e = $6; lost += $10; u += $12 / 2; w += $14 / 2; kcpu += $18 / 1000 }
	END {
		t = e / 1000; cpu = ticks / hz
		printf "versus %-10s run %s: sessions %d failed %d lost_hellos %d in %.2f s: %.0f sessions/s, cpu %.2f s (%.0f %% of the core), %.3f cpu-s per 1000 sessions, median upgrade %.1f ms, hello->welcome %.1f ms, clients cpu %.2f s (%.0f %% of core 1)\n",
			srv, run, n, failed, lost, t, n / t, cpu, 100 * cpu / t, 1000 * cpu / n, u, w, kcpu, 100 * kcpu / t
		printf "%s %d %d %.3f %.2f\n", srv, n, lost, t, cpu >>sum
	}'
	# The steady part, as the first client measured it (from a tenth of its
	# sessions set up to nine tenths: no ramp, no tail): the server's share
	# of its core, the two clients' of core 1 (each over its own window),
	# and each core's idle share.
	cat "$work/out.0" "$work/out.100000" | awk -v srv="$srv" -v run="$run" '
	/^ready/ { k++; if (k == 1) { win = $20; server = $22; idle0 = $26; idle1 = $28 } if ($20 > 0) self += $24 / $20 }
	END {
		if (win > 0) printf "versus %-10s run %s: steady part (10-90 %% of a client'"'"'s sessions, %d ms): server %.0f %% of its core, clients %.0f %% of core 1; core 0 idle %.0f %%, core 1 idle %.0f %%\n", srv, run, win, 100 * server / win, 100 * self, idle0, idle1
	}'
	# Machine-wide: how idle each core was over the same window, and its
	# softirq share (loopback TCP work done outside a process's account).
	echo "$s0 $s1" | awk -v srv="$srv" -v run="$run" '{
		printf "versus %-10s run %s: core 0 idle %.0f %%, softirq %.0f %%; core 1 idle %.0f %%, softirq %.0f %%\n", srv, run,
			100 * ($8 - $2) / ($7 - $1), 100 * ($9 - $3) / ($7 - $1), 100 * ($11 - $5) / ($10 - $4), 100 * ($12 - $6) / ($10 - $4) }'
	if [ -n "$perf" ]; then
		kill -INT "$perf"; wait "$perf" 2>/dev/null || true
		awk -F, -v srv="$srv" -v run="$run" -v n="$N" '$1 ~ /^[0-9]+$/ {printf "versus %-10s run %s: %-32s %.2f per session\n", srv, run, $3, $1 / n}' "$work/perf.$srv"
	fi
	[ -n "$prof" ] && wait "$prof"
	stop_clients 0 100000
	kill -TERM $pid; wait $pid 2>/dev/null || true
}

# instructions_turn SERVER RUN GC: one storm of N sessions against SERVER
# under callgrind (GC on: the runtime's default; off: GOGC=off); prints
# instructions, allocations and bytes per session.
instructions_turn() {
	local srv=$1 run=$2 gc=$3 pid flags=() metrics env=(GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1)
	[ "$gc" = off ] && env+=(GOGC=off)
	local vg=(valgrind --tool=callgrind --callgrind-out-file="$work/cg.$srv.%p")
	if [ "$srv" = hub ]; then
		env "${env[@]}" taskset -c 0 "${vg[@]}" "$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
		pid=$!
		wait_ready
		metrics=http://$ADMIN/metrics
	else
		env "${env[@]}" taskset -c 0 "${vg[@]}" "$CENTRIFUGO" --config "$work/centrifugo.json" >"$work/centrifugo.log" 2>&1 &
		pid=$!
		for _ in $(seq 600); do curl -sf "http://$CF_ADDR/health" >/dev/null 2>&1 && break; sleep 0.1; done
		flags=(-server centrifugo -centrifugo-protocol "${CF_PROTOCOL:-protobuf}" -addr "$CF_ADDR")
		metrics=http://$CF_ADDR/metrics
	fi
	gometric() { curl -s "$metrics" | awk -v m="$1" '$1 == m {printf "%.0f\n", $2}'; }
	start_clients 300 200000 bench /dev/null 1 -conc 50 "${flags[@]}"
	wait_line "$work/out.200000" '^ready'
	stop_clients 200000
	sleep 1
	local m0 b0 m1 b1
	m0=$(gometric go_memstats_mallocs_total); b0=$(gometric go_memstats_alloc_bytes_total)
	rm -f "$work"/cg."$srv".*
	callgrind_control -z "$pid" >/dev/null 2>&1
	start_clients "$N" 0 bench /dev/null 1 -conc "$CONC" -hello-timeout 120s "${flags[@]}"
	wait_line "$work/out.0" '^ready'
	callgrind_control -d "$pid" >/dev/null 2>&1
	m1=$(gometric go_memstats_mallocs_total); b1=$(gometric go_memstats_alloc_bytes_total)
	stop_clients 0
	kill -TERM $pid; wait $pid 2>/dev/null || true
	local f ir
	f=$(ls -t "$work"/cg."$srv".*.1 | head -1)
	ir=$(awk '/^totals:/ {print $2}' "$f")
	[ -n "${CALLGRIND_KEEP:-}" ] && cp "$f" "$CALLGRIND_KEEP.$srv.gc$gc.$run"
	awk '/^ready/ {print $2, $4, $10}' "$work/out.0" | awk -v srv="$srv" -v run="$run" -v gc="$gc" -v ir="$ir" -v m="$(( m1 - m0 ))" -v b="$(( b1 - b0 ))" '{
		printf "instructions %-10s run %s gc %-3s: sessions %d failed %d lost_hellos %d: %.0f user instructions per session, %.1f allocations and %.0f bytes per session (the runtime'"'"'s counts, with one /metrics read)\n", srv, run, gc, $1, $2, $3, ir / $1, m / $1, b / $1 }'
}

echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$mode" = idle ] || [ "$mode" = all ]; then
	for r in $(seq "$RUNS"); do idle_run "$r"; done
fi
if [ "$mode" = upgrades ] || [ "$mode" = all ]; then
	for r in $(seq "$RUNS"); do upgrades_run "$r" ""; upgrades_run "$r" bench; done
fi
if [ "$mode" = versus ] || [ "$mode" = instructions ]; then
	CENTRIFUGO=${CENTRIFUGO:-$(command -v centrifugo || echo "$(go env GOPATH)/bin/centrifugo")}
	[ -x "$CENTRIFUGO" ] || { echo "no centrifugo at $CENTRIFUGO: go install github.com/centrifugal/centrifugo/v6@v6.9.1" >&2; exit 1; }
	CF_ADDR=127.0.0.1:7460
	cat >"$work/centrifugo.json" <<JSON
{
  "http_server": {"address": "127.0.0.1", "port": 7460},
  "log": {"level": "error"},
  "health": {"enabled": true},
  "client": {"token": {"hmac_secret_key": "$SECRET"}, "allowed_origins": ["*"]},
  "channel": {"without_namespace": {"allow_subscribe_for_client": true}},
  "http_api": {"key": "$KEY"},
  "usage_stats": {"disabled": true}$([ "$mode" = instructions ] && echo ', "prometheus": {"enabled": true}')
}
JSON
fi
if [ "$mode" = instructions ]; then
	echo "# instructions: $N sessions a turn, $CONC dials in flight, $(valgrind --version), Centrifugo protocol ${CF_PROTOCOL:-protobuf}, $("$CENTRIFUGO" version 2>/dev/null | head -1)"
	for r in $(seq "$RUNS"); do
		for srv in hub centrifugo; do
			[ -n "${ONLY:-}" ] && [ "$ONLY" != "$srv" ] && continue
			instructions_turn "$srv" "$r" on
			instructions_turn "$srv" "$r" off
		done
	done
fi
if [ "$mode" = versus ]; then
	echo "# versus: $N sessions a turn, $CONC dials in flight, Centrifugo protocol ${CF_PROTOCOL:-protobuf}, $("$CENTRIFUGO" version 2>/dev/null | head -1)"
	for r in $(seq "$RUNS"); do versus_turn hub "$r"; versus_turn centrifugo "$r"; done
	for srv in hub centrifugo; do
		awk -v srv="$srv" '$1 == srv { n += $2; lost += $3; t += $4; cpu += $5 } END {
			printf "versus %-10s total: sessions %d lost_hellos %d, %.0f sessions/s, %.3f cpu-s per 1000 sessions, %.0f sessions per cpu-second\n", srv, n, lost, n / t, 1000 * cpu / n, n / cpu }' "$work/versus.sum"
	done
fi
