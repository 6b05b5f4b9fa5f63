#!/usr/bin/env bash
# bench/dns/run.sh: dnsperf against corral dns, Knot DNS and NSD serving the
# same zone on 127.0.0.1 (see docs/benchmarks.md, "DNS").
#
# Each server is pinned to core 0 with one worker and RRL off; dnsperf is
# pinned to core 1. For (a) a static A record with 2 values and (b) a
# multivalue record with 8 health-checked values (corral only has health
# checks; Knot and NSD serve the same 8 addresses as a plain RRset) the script
# reports queries per second, lost queries, and the CPU time per answered
# query two ways:
#   core0_us: core 0's busy time from /proc/stat over the run / queries
#             answered (includes the kernel's packet work, and anything
#             else that ran on core 0: note the machine's load);
#   proc_us:  the server processes' own user+system time / queries
#             answered (robust to other work on core 0).
#
# Usage: bash bench/dns/run.sh            (env: DURATION=10 RUNS=3 SERVERS="corral knot nsd",
#                                         QPS=N caps dnsperf's rate; default: its maximum;
#                                         RESOLVERS=1 turns corral's resolver-aware answers on:
#                                         dnsperf's one source is then a big resolver)
# Installs dnsperf, knot and nsd with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
SERVERS=${SERVERS:-"corral knot nsd"}
PORT=${PORT:-15390}
RESOLVERS=${RESOLVERS:-0}
ADMIN_PORT=$((PORT + 1))

need=()
command -v dnsperf >/dev/null 2>&1 || need+=(dnsperf)
command -v knotd >/dev/null 2>&1 || need+=(knot)
command -v nsd >/dev/null 2>&1 || need+=(nsd)
if ((${#need[@]})); then
	sudo=""
	if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
	echo "bench/dns: installing ${need[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ "$(nproc)" -lt 2 ]; then
	echo "bench/dns: needs 2 cores (server on core 0, dnsperf on core 1)" >&2
	exit 1
fi

work=$(mktemp -d /tmp/corral-dnsbench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/corral" ./cmd/corral

# The zone: SOA, NS, static (2 A), multi (8 A).
cat >"$work/bench.test.zone" <<ZONE
\$ORIGIN bench.test.
\$TTL 60
@       IN SOA ns1.bench.test. hostmaster.bench.test. 1 3600 600 604800 60
@       IN NS  ns1.bench.test.
ns1     IN A   127.0.0.1
static  IN A   192.0.2.1
static  IN A   192.0.2.2
ZONE
for i in 1 2 3 4 5 6 7 8; do echo "multi   IN A   10.0.0.$i" >>"$work/bench.test.zone"; done

{
	if [ "$RESOLVERS" = 1 ]; then echo "resolvers: {enabled: true}"; fi
	cat <<YAML
listen: 127.0.0.1:$PORT
admin: {addr: "127.0.0.1:$ADMIN_PORT"}
sockets: 1
rrl: {enabled: false}
health:
  checks:
YAML
	for i in 1 2 3 4 5 6 7 8; do
		echo "    - {name: lb-$i, kind: http, url: \"http://127.0.0.1:$ADMIN_PORT/healthz\", interval: 10s}"
	done
	cat <<YAML
zones:
  - origin: bench.test
    ttl: 60s
    soa: {mname: ns1.bench.test, rname: hostmaster.bench.test, serial: 1, minimum: 60s}
    ns: [ns1.bench.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - {name: static, type: A, values: [192.0.2.1, 192.0.2.2]}
      - name: multi
        type: A
        policy: multivalue
        values:
YAML
	for i in 1 2 3 4 5 6 7 8; do echo "          - {value: 10.0.0.$i, check: lb-$i}"; done
} >"$work/corral.yaml"

mkdir -p "$work/knot"
cat >"$work/knot.conf" <<KNOT
server:
    listen: 127.0.0.1@$PORT
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
    rundir: "$work/knot"
    user: root:root
database:
    storage: "$work/knot"
log:
  - target: stderr
    any: warning
zone:
  - domain: bench.test
    storage: "$work"
    file: bench.test.zone
KNOT

mkdir -p "$work/nsd"
cat >"$work/nsd.conf" <<NSD
server:
    ip-address: 127.0.0.1@$PORT
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "$work"
    database: ""
    pidfile: "$work/nsd/nsd.pid"
    xfrdfile: "$work/nsd/xfrd.state"
    zonelistfile: "$work/nsd/zone.list"
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    verbosity: 0
    hide-version: yes
remote-control:
    control-enable: no
zone:
    name: bench.test
    zonefile: bench.test.zone
NSD

echo "static.bench.test A" >"$work/static.q"
echo "multi.bench.test A" >"$work/multi.q"

# cpu0 prints core 0's busy and total jiffies.
cpu0() { awk '$1 == "cpu0" { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6 }' /proc/stat; }
# proc_ticks prints the user+system ticks of the processes in $@.
proc_ticks() {
	local t=0 p
	for p in "$@"; do
		if [ -r "/proc/$p/stat" ]; then
			# Fields after the command name, which may hold spaces ("nsd: server 1").
			t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
		fi
	done
	echo "$t"
}
# tree lists a process and its descendants.
tree() {
	local p=$1
	echo "$p"
	for c in $(pgrep -P "$p" 2>/dev/null); do tree "$c"; done
}
hz=$(getconf CLK_TCK)

start_server() {
	case $1 in
	corral) taskset -c 0 "$work/corral" dns --config "$work/corral.yaml" --log-level warn >"$work/corral.log" 2>&1 & ;;
	knot) taskset -c 0 knotd -c "$work/knot.conf" >"$work/knot.log" 2>&1 & ;;
	nsd) taskset -c 0 nsd -d -c "$work/nsd.conf" >"$work/nsd.log" 2>&1 & ;;
	esac
	server_pid=$!
	pids+=("$server_pid")
	for _ in $(seq 100); do
		if dig +short +time=1 +tries=1 @127.0.0.1 -p "$PORT" static.bench.test A 2>/dev/null | grep -q 192.0.2; then
			# corral's health checks start healthy: multi answers 8 from the start.
			return 0
		fi
		sleep 0.1
	done
	echo "bench/dns: $1 did not answer; its log:" >&2
	cat "$work/$1.log" >&2
	exit 1
}

stop_server() {
	kill "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	sleep 0.5
}

echo "# bench/dns/run.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# duration ${DURATION}s x ${RUNS} runs; server on core 0 (one worker, RRL off), dnsperf on core 1"
printf "%-7s %-7s %4s %10s %8s %9s %9s %s\n" server case run qps lost core0_us proc_us load1
# Runs interleave the servers so that a change of machine load hits all.
for run in $(seq "$RUNS"); do
	for server in $SERVERS; do
		start_server "$server"
		procs=$(tree "$server_pid" | tr '\n' ' ')
		for case in static multi; do
			read -r b0 t0 < <(cpu0)
			p0=$(proc_ticks $procs)
			out=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$PORT" -d "$work/$case.q" -l "$DURATION" -c 4 -q 200 ${QPS:+-Q "$QPS"} 2>&1)
			read -r b1 t1 < <(cpu0)
			p1=$(proc_ticks $procs)
			completed=$(echo "$out" | awk '/Queries completed:/ { print $3 }')
			lost=$(echo "$out" | awk '/Queries lost:/ { print $3 }')
			qps=$(echo "$out" | awk '/Queries per second:/ { printf "%.0f", $4 }')
			if [ -z "$completed" ] || [ "$completed" = 0 ]; then
				echo "bench/dns: dnsperf failed against $server:" >&2
				echo "$out" >&2
				exit 1
			fi
			core0=$(awk -v b="$((b1 - b0))" -v n="$completed" -v hz="$hz" 'BEGIN { printf "%.2f", b / hz * 1e6 / n }')
			proc=$(awk -v b="$((p1 - p0))" -v n="$completed" -v hz="$hz" 'BEGIN { printf "%.2f", b / hz * 1e6 / n }')
			printf "%-7s %-7s %4s %10s %8s %9s %9s %s\n" "$server" "$case" "$run" "$qps" "$lost" "$core0" "$proc" "$(cut -d' ' -f1 /proc/loadavg)"
		done
		stop_server
	done
done
