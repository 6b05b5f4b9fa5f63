#!/usr/bin/env bash
# scripts/test.sh: the test command of README.md. It installs what the tests
# need on a fresh Debian machine that has only Go (idempotently: nothing is
# installed twice), then runs every test of the module with the race
# detector. Extra arguments go to `go test` (for example -run or -short).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests call: dig (bind9-dnsutils) and kdig
# (knot-dnsutils) are the real DNS clients of the authdns tests.
need=()
command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
command -v kdig >/dev/null 2>&1 || need+=(knot-dnsutils)
if ((${#need[@]})); then
	sudo=""
	if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
	echo "scripts/test.sh: installing ${need[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

go test -race -timeout 25m "$@" ./...
