#!/usr/bin/env bash
# bench/dns/icount.sh: instructions per benchmark iteration, counted with
# callgrind, for comparisons on a machine too busy for timings.
#
# Usage: bash bench/dns/icount.sh PACKAGE BENCHMARK-REGEXP
#   e.g. bash bench/dns/icount.sh ./authdns 'BenchmarkHandle/multivalue'
#        bash bench/dns/icount.sh ./authdns/answer 'BenchmarkSelect/cidr-3$'
# env: N=20000 (iterations of the first run; the second runs 2N)
#
# It builds the package's test binary, runs the benchmark for N and 2N
# iterations under valgrind --tool=callgrind and prints the difference of
# the instruction totals divided by N: setup and the benchmark harness
# cancel out. The regexp should select one benchmark. Go's asynchronous
# preemption is turned off (callgrind mishandles its signals).
set -euo pipefail
cd "$(dirname "$0")/../.."
pkg=${1:?package}
re=${2:?benchmark regexp}
n=${N:-20000}
command -v valgrind >/dev/null || { echo "bench/dns/icount.sh: needs valgrind" >&2; exit 1; }
bin=$(mktemp /tmp/corral-icount.XXXXXX)
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" "$pkg"
run() {
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$bin" -test.run '^$' -test.bench "$re" -test.benchtime "${1}x" -test.cpu 1 2>&1 |
		awk '/Collected/ { print $4 }'
}
a=$(run "$n")
b=$(run $((2 * n)))
if [ -z "$a" ] || [ -z "$b" ]; then
	echo "bench/dns/icount.sh: callgrind printed no total" >&2
	exit 1
fi
echo "$re: $(((b - a) / n)) instructions/op"
