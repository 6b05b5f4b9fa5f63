#!/usr/bin/env bash
# bench/kraken/held.sh: kraken's memory per held WebSocket session (issue 14,
# target <= 4 KiB of RSS per held session in the kraken process), or per
# held gRPC device with -protocol grpc (an HTTP/2 connection and a Connect
# stream each).
#
#   bash bench/kraken/held.sh [-n 19000] [-hold 20s] [-protocol websocket|grpc] [-tls]
#
# -tls serves the hub's listeners over TLS (a self-signed certificate for
# 127.0.1.1 made with openssl, given to kraken with --ca-file): wss or
# grpcs sessions.
#
# One hub process (memory history, pings every 10 min) on 127.0.1.1; then
# `corral kraken run` twice with a scenario that holds its devices for
# -hold: once with 1 device (the baseline: the process, its poller, its
# dialers) and once with N. Each time the kraken process's VmRSS is read
# from /proc once the progress line says every device is held (and again
# 2 s later; the larger is kept). Reports kraken's RSS, the RSS per held
# session ((RSS_N - RSS_1) / (N - 1)), and the hub's RSS per session
# beside it. The per-process fd limit here is 20,000: N up to about
# 19,000 (one socket per session on each side).
#
# Needs: Go, curl. No figure is meaningful on a loaded machine; run it on
# a quiet one.
set -euo pipefail
cd "$(dirname "$0")/../.."

N=19000
HOLD=20s
PROTOCOL=websocket
TLS=
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-hold) HOLD=$2; shift 2 ;;
	-protocol) PROTOCOL=$2; shift 2 ;;
	-tls) TLS=1; shift ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d /tmp/corral-bench-kraken.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral

export KRAKEN_BENCH_SECRET=bench-secret-0123456789abcdef
ADDR=127.0.1.1:7470
GRPC=127.0.1.1:7471
ADMIN=127.0.1.1:7479
case "$PROTOCOL" in
websocket) TARGET="ws://$ADDR/v1/ws" GRPC_LISTEN='""' ;;
grpc) TARGET="grpc://$GRPC" GRPC_LISTEN=$GRPC ;;
*) echo "-protocol: websocket or grpc" >&2; exit 2 ;;
esac
TLS_YAML= CA_FLAG=
if [ -n "$TLS" ]; then
	TARGET=${TARGET/ws:/wss:}; TARGET=${TARGET/grpc:/grpcs:}
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.1.1 \
		-addext subjectAltName=IP:127.0.1.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
	TLS_YAML="tls: {cert_file: $work/cert.pem, key_file: $work/key.pem}"
	CA_FLAG="--ca-file $work/cert.pem"
fi
cat >"$work/hub.yaml" <<YAML
listen: $ADDR
grpc_listen: $GRPC_LISTEN
admin: {addr: $ADMIN}
history: {store: memory}
auth:
  keys: [{algorithm: HS256, secret: $KRAKEN_BENCH_SECRET}]
session:
  handshake_timeout: 60s
  ping_interval: 10m
$TLS_YAML
YAML

rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
wait_ready() {
	for _ in $(seq 200); do
		curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "hub not ready" >&2; return 1
}

"$work/corral" hub --config "$work/hub.yaml" --log-level warn >"$work/hub.log" 2>&1 &
hub=$!
wait_ready
hub_base=$(rss "$hub")

# hold COUNT: runs kraken with COUNT devices held; prints kraken's RSS
# while they are all held.
hold() {
	local n=$1
	cat >"$work/hold.yaml" <<YAML
name: hold-$n
duration: $HOLD
population: {devices: $n, initial: $n, protocol: $PROTOCOL}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 1, max_new_per_second: 100000}]
client:
  backoff: {policy: full, base: 100ms, cap: 5s}
  connect_timeout: 60s
YAML
	"$work/corral" kraken run "$work/hold.yaml" --target "$TARGET" $CA_FLAG \
		--secret-env KRAKEN_BENCH_SECRET --out "$work/result.$n.json" 2>"$work/kraken.$n.log" &
	local k=$!
	for _ in $(seq 1200); do
		grep -q "t=.* held $n/$n " "$work/kraken.$n.log" 2>/dev/null && break
		kill -0 "$k" 2>/dev/null || { cat "$work/kraken.$n.log" >&2; return 1; }
		sleep 0.1
	done
	local a b
	a=$(rss "$k"); sleep 2; b=$(rss "$k")
	[ "$n" -gt 1 ] && echo "hub_rss $(rss "$hub")" >"$work/hub.$n"
	wait "$k"
	echo $(( a > b ? a : b ))
}

k1=$(hold 1)
kn=$(hold "$N")
hub_n=$(awk '{print $2}' "$work/hub.$N")
awk -v p="$PROTOCOL" -v t="${TLS:+ over TLS}" -v n="$N" -v k1="$k1" -v kn="$kn" -v hb="$hub_base" -v hn="$hub_n" 'BEGIN {
	printf "protocol %s%s\n", p, t
	printf "kraken: %d sessions held, RSS %.1f MiB (1 session: %.1f MiB): %.2f KiB per held session\n", n, kn/1048576, k1/1048576, (kn-k1)/(n-1)/1024
	printf "hub:    RSS %.1f MiB (before: %.1f MiB): %.2f KiB per session\n", hn/1048576, hb/1048576, (hn-hb)/n/1024
}'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
