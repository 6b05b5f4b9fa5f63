#!/usr/bin/env bash
# bench/edge/tls.sh: issue 12's TLS figure, TLS 1.3 handshakes on one core
# of the shipped server.
#
#   bash bench/edge/tls.sh [-runs 3] [-d 10s] [-conc 16] [-warmup 2s]
#
# The server is `corral edge` with `tls` (one self-signed ECDSA P-256
# certificate made by openssl), alone on CPU 0 with GOMAXPROCS=1
# (taskset): its device listener, internal/wsserve's TLS, where every
# handshake of a device runs. The clients are bench/edge/tlsload on CPU 1:
# -conc workers, each dialling, running one TLS 1.3 handshake
# (X25519MLKEM768, Go's default, checked on every handshake) and closing,
# over and over. After -warmup, tlsload counts the handshakes of a -d
# window and reads the edge's own CPU accounting (utime+stime of
# /proc/PID/stat, every thread, user and kernel) at the window's ends.
#
# Each run, on a fresh edge:
#   bound:   BenchmarkBound/x25519mlkem768 of internal/tlsconf on CPU 0
#            with GOMAXPROCS=1 (the server's cryptography of one full
#            handshake: ML-KEM-768 encapsulation, X25519 key generation
#            and exchange, one ECDSA P-256 signature), while the edge idles;
#   full:    handshakes without a session cache;
#   resumed: each worker resumes its session ticket (tlsload checks that
#            every handshake after its first resumes).
# Per turn: handshakes/s, the edge's CPU per handshake and the share of its
# core it used (the clients' beside it); the figures are the medians over
# the runs: full against the bound (target >= 0.8) and full against
# resumed (target >= 5). The edge's own counters
# (corral_edge_tls_handshakes_total) are printed beside tlsload's counts.
#
# A Go client's handshake costs more CPU than the server's (ML-KEM key
# generation and decapsulation, a signature check), so one client core
# does not quite fill the server's: the edge's busy share says how close
# it came. Its CPU per handshake is measured either way; 1 / that is the
# handshakes one core serves.
#
# EDGE_GOGC sets the edge's GOGC (default 100, Go's): the edge idles
# between the turns with a heap of a few MiB, so with 100 it collects
# about every 4 MiB allocated, some 50 handshakes (crypto/tls allocates
# about 75 KB on the server per full handshake); EDGE_GOGC=400 shows
# what the collector costs.
#
# TLS_CPUPROFILE=DIR saves the edge's CPU profile of each turn
# (DIR/full-1.prof, ...) and the clients' (DIR/tlsload-full-1.prof, ...)
# with the binaries, for `go tool pprof DIR/corral DIR/full-1.prof`.
#
# Needs: Go, curl, openssl, taskset, two CPUs (0 for the edge, 1 for the
# clients). Run it on a quiet machine: nothing else on either CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=3
DUR=10s
CONC=16
WARMUP=2s
while [ $# -gt 0 ]; do
	case "$1" in
	-runs) RUNS=$2; shift 2 ;;
	-d) DUR=$2; shift 2 ;;
	-conc) CONC=$2; shift 2 ;;
	-warmup) WARMUP=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
for v in "$DUR" "$WARMUP"; do
	[[ $v =~ ^[0-9]+s$ ]] || { echo "-d and -warmup are whole seconds, as 10s" >&2; exit 2; }
done
if [ "$(nproc)" -lt 2 ]; then
	echo "tls.sh needs two CPUs (0 for the edge, 1 for the clients)" >&2; exit 2
fi

work=$(mktemp -d /tmp/corral-bench-tls.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/corral" ./cmd/corral
go build -o "$work/tlsload" ./bench/edge/tlsload
go test -c -o "$work/tlsconf.test" ./internal/tlsconf
if [ -n "${TLS_CPUPROFILE:-}" ]; then
	mkdir -p "$TLS_CPUPROFILE"
	cp "$work/corral" "$work/tlsload" "$TLS_CPUPROFILE/"
fi

EDGE=127.0.0.1:7490
EDGE_ADMIN=127.0.0.1:7499
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench.corral.test \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
# The origin is never dialled: the clients close after their handshakes,
# before any WebSocket upgrade.
cat >"$work/edge.yaml" <<YAML
listen: $EDGE
grpc_listen: ""
admin: {addr: $EDGE_ADMIN}
origins:
  static: ["127.0.0.1:7491"]
relay:
  key: bench-relay-key-0123456789
tls: {cert_file: $work/cert.pem, key_file: $work/key.pem}
YAML

metric() { curl -s "http://$EDGE_ADMIN/metrics" | awk -v m="$1" '$1 == m {s += $2} END {printf "%.0f\n", s}'; }
wait_ready() {
	for _ in $(seq 200); do
		curl -sf "http://$EDGE_ADMIN/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "edge not ready" >&2; return 1
}
field() { # LINE NAME: the value of NAME=... in tlsload's line
	awk -v k="$2" '{for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) {print substr($i, length(k) + 2); exit}}' <<<"$1"
}
calc() { awk "BEGIN {printf \"%.4f\", $1}"; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

: >"$work/bound" ; : >"$work/full" ; : >"$work/resumed"
if curl -s -o /dev/null "http://$EDGE_ADMIN/healthz"; then
	echo "something already listens on $EDGE_ADMIN" >&2; exit 1
fi
for run in $(seq "$RUNS"); do
	GOGC=${EDGE_GOGC:-100} GOMAXPROCS=1 taskset -c 0 "$work/corral" edge --config "$work/edge.yaml" --log-level warn >"$work/edge.log" 2>&1 &
	epid=$!
	wait_ready
	if ! kill -0 "$epid" 2>/dev/null; then # another process answered on the addresses
		cat "$work/edge.log" >&2; echo "the edge exited" >&2; exit 1
	fi

	out=$(GOMAXPROCS=1 taskset -c 0 "$work/tlsconf.test" -test.run '^$' -test.bench 'Bound/x25519mlkem768$' \
		-test.benchtime 3s -test.cpu 1)
	bns=$(awk '$1 ~ /^BenchmarkBound\/x25519mlkem768/ {for (i = 1; i < NF; i++) if ($(i + 1) == "ns/op") print $i}' <<<"$out")
	if [ -z "$bns" ]; then
		echo "$out" >&2; echo "BenchmarkBound gave no ns/op" >&2; exit 1
	fi
	echo "$bns" >>"$work/bound"
	printf 'bound run %d: %.1f us per handshake (%.0f/s on one core)\n' "$run" "$(calc "$bns / 1000")" "$(calc "1e9 / $bns")"

	for mode in full resumed; do
		kind=$mode
		before=$(metric "corral_edge_tls_handshakes_total{kind=\"$kind\"}")
		prof=""
		if [ -n "${TLS_CPUPROFILE:-}" ]; then
			# The profile covers the window (tlsload's warm-up first).
			secs=${DUR%s}
			( sleep "${WARMUP%s}"; curl -s -o "$TLS_CPUPROFILE/$mode-$run.prof" \
				"http://$EDGE_ADMIN/debug/pprof/profile?seconds=$secs" ) &
			prof=$!
		fi
		cprof=()
		[ -n "${TLS_CPUPROFILE:-}" ] && cprof=(-cpuprofile "$TLS_CPUPROFILE/tlsload-$mode-$run.prof")
		line=$(taskset -c 1 "$work/tlsload" -addr "$EDGE" -mode "$mode" -conc "$CONC" -d "$DUR" -warmup "$WARMUP" -server-pid "$epid" "${cprof[@]}")
		[ -n "$prof" ] && wait "$prof"
		after=$(metric "corral_edge_tls_handshakes_total{kind=\"$kind\"}")
		us=$(field "$line" server_us_per_hs)
		echo "$us" >>"$work/$mode"
		printf '%s run %d: %s handshakes/s; edge CPU %s us per handshake (%.0f/s on one core; %.0f %% of it in the kernel), %.0f %% of its core used; clients %s us per handshake, %.0f %% of core 1 used (%s of %s resumed, %s errors; the edge counted %s %s handshakes over the turn)\n' \
			"$mode" "$run" "$(field "$line" rate)" "$us" "$(calc "1e6 / $us")" \
			"$(calc "$(field "$line" server_sys_s) / $(field "$line" server_cpu_s) * 100")" \
			"$(calc "$(field "$line" server_busy) * 100")" "$(field "$line" client_us_per_hs)" \
			"$(calc "$(field "$line" client_busy) * 100")" "$(field "$line" resumed)" "$(field "$line" handshakes)" \
			"$(field "$line" errors)" "$((after - before))" "$kind"
	done
	kill "$epid"
	wait "$epid" 2>/dev/null || true
done

b=$(median <"$work/bound")
f=$(median <"$work/full")
r=$(median <"$work/resumed")
printf 'medians over %d runs: bound %.1f us, full %.1f us, resumed %.1f us per handshake; full at %.0f %% of the bound (target >= 80 %%); resumed %.2fx cheaper than full (target >= 5x)\n' \
	"$RUNS" "$(calc "$b / 1000")" "$f" "$r" "$(calc "$b / 1000 / $f * 100")" "$(calc "$f / $r")"
