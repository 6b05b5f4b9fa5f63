#!/usr/bin/env bash
# bench/hub/drain.sh: a drain of many sessions whose drain.rate cannot meet
# drain.deadline (issue 10, item 3). One hub holds N WebSocket sessions
# (Hello, no subscription) opened by client processes of at most PER
# sessions each, spread over source addresses of 127.0.0.0/8; then the hub
# gets SIGTERM and every client reports, for each of its sessions, whether
# it got a GoAway marked drain, its retry hint, and a close frame (1001) or
# a cut without one.
#
#   bash bench/hub/drain.sh [-n 40000] [-per 13334] [-rate 1000] [-deadline 30s] [-retry 1s]
#
# With the defaults (1,000/s and 30 s) a hub reaches 27,000 sessions at its
# rate by 90 % of the deadline; 40,000 needs the pace raised to ~1,480/s.
# Figures: sessions reached (want N of N with GoAway + hint + 1001, 0 cut),
# the spread of the hints (want drain.retry_after to twice it), the time
# from the first GoAway to the last (want <= 0.9 x deadline) and from
# SIGTERM to the hub's exit, and the hub's log line about the pace.
#
# Needs: Go, curl. The hub process holds N sockets: it needs a
# file-descriptor limit above N (the script raises the soft limit up to the
# hard one, and stops if that is not enough). Where the hard limit is
# 20,000, run -n 19000 -deadline 10s: the same shortfall (10,000 reachable
# at the rate) with what one process may hold.
set -euo pipefail
cd "$(dirname "$0")/../.."

N=40000
PER=13334
RATE=1000
DEADLINE=30s
RETRY=1s
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-per) PER=$2; shift 2 ;;
	-rate) RATE=$2; shift 2 ;;
	-deadline) DEADLINE=$2; shift 2 ;;
	-retry) RETRY=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done

need=$((N + 1000))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
	ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
	echo "drain.sh: a process may open $(ulimit -n) files here, the hub needs about $need for $N sessions." >&2
	echo "drain.sh: run with -n $(( $(ulimit -n) - 1000 )) and a deadline that the rate cannot meet (e.g. -deadline 10s)." >&2
	exit 2
fi
if [ "$PER" -gt 19000 ]; then echo "drain.sh: -per above 19000 passes a client's file limit" >&2; exit 2; fi

work=$(mktemp -d /tmp/corral-bench-drain.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral
go build -o "$work/drainload" ./bench/hub/drainload

SECRET=bench-secret-0123456789abcdef
ADDR=127.0.0.1:7460
ADMIN=127.0.0.1:7469
cat >"$work/hub.yaml" <<YAML
listen: $ADDR
grpc_listen: ""
admin: {addr: $ADMIN}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $SECRET}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
drain: {rate: $RATE, deadline: $DEADLINE, retry_after: $RETRY}
YAML

metric() { curl -s "http://$ADMIN/metrics" | awk -v m="$1" '$1 == m || index($1, m"{") == 1 {s += $2} END {printf "%.0f\n", s}'; }
ms() { date +%s%3N; }

echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# N=$N per-client=$PER drain.rate=$RATE drain.deadline=$DEADLINE drain.retry_after=$RETRY"
"$work/corral" hub --config "$work/hub.yaml" --log-format json >"$work/hub.log" 2>&1 &
hub=$!
for _ in $(seq 200); do curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

hint_min=$RETRY
hint_max=$(awk -v r="$RETRY" 'BEGIN { n = r; sub(/[a-z]+$/, "", n); u = r; sub(/^[0-9.]+/, "", u); print 2 * n u }')
k=0
left=$N
while [ "$left" -gt 0 ]; do
	n=$(( left < PER ? left : PER ))
	# Each client process has its own /16 of sources, 64 addresses.
	"$work/drainload" -addr "$ADDR" -n "$n" -src "127.$((20 + k)).0.1" -srcs 64 -secret "$SECRET" \
		-hint-min "$hint_min" -hint-max "$hint_max" >"$work/client.$k" 2>"$work/client.$k.err" &
	k=$((k + 1))
	left=$((left - n))
done
for i in $(seq 0 $((k - 1))); do
	for _ in $(seq 3000); do grep -q '^ready' "$work/client.$i" 2>/dev/null && break; sleep 0.1; done
	grep '^ready' "$work/client.$i" >/dev/null || { echo "client $i never ready" >&2; cat "$work/client.$i.err" >&2; exit 1; }
done
for _ in $(seq 600); do [ "$(metric corral_hub_sessions)" -ge "$N" ] && break; sleep 0.1; done
echo "sessions open on the hub: $(metric corral_hub_sessions) (clients: $(cat "$work"/client.* 2>/dev/null | awk '/^ready/ {s += $2; f += $3} END {print s " opened, " f " failed"}'))"

t0=$(ms)
kill -TERM "$hub"
wait "$hub" || true
t1=$(ms)
for i in $(seq 0 $((k - 1))); do
	for _ in $(seq 6000); do grep -q '^summary' "$work/client.$i" 2>/dev/null && break; sleep 0.1; done
done
grep -h '^summary' "$work"/client.[0-9]* | sed 's/^summary //' >"$work/summaries"
awk -v t0="$t0" -v t1="$t1" -v n="$N" '
function num(key,   m) { if (match($0, "\"" key "\":[0-9.]+")) { m = substr($0, RSTART, RLENGTH); sub(/.*:/, "", m); return m + 0 } return 0 }
{
	s += num("sessions"); g += num("goaway"); d += num("goaway_drain"); h += num("hint_in_range")
	c += num("close_frame"); c1 += num("close_1001"); cut += num("cut_without_close_frame"); u += num("unfinished_at_timeout")
	f = num("first_goaway_unix_ms"); l = num("last_goaway_unix_ms")
	if (f > 0 && (first == 0 || f < first)) first = f
	if (l > last) last = l
	if (hmin == 0 || num("hint_min_ms") < hmin) hmin = num("hint_min_ms")
	if (num("hint_max_ms") > hmax) hmax = num("hint_max_ms")
}
END {
	printf "sessions %d: goaway %d (drain flag %d, hint in range %d), close frame %d (1001: %d), cut without close frame %d, unfinished %d\n", s, g, d, h, c, c1, cut, u
	printf "hints %d..%d ms; first GoAway %d ms after SIGTERM, last %d ms after; hub exited %d ms after SIGTERM\n", hmin, hmax, first - t0, last - t0, t1 - t0
	if (s == n && g == n && d == n && h == n && c1 == n && cut == 0) print "verdict: every one of " n " sessions got its GoAway, a retry hint in range and a close frame 1001"
	else print "verdict: NOT every session was sent away properly"
}' "$work/summaries"
grep -h 'drain' "$work/hub.log" | grep -E 'pace|draining' | head -3
