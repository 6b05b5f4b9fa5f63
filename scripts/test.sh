#!/usr/bin/env bash
# scripts/test.sh: the test command of README.md. It installs what the tests
# need on a fresh Debian machine that has only Go (idempotently: nothing is
# installed twice), then runs the browser SDK's unit tests and every test of
# the module with the race detector. Extra arguments go to `go test` (for
# example -run or -short).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests call: dig (bind9-dnsutils) and kdig
# (knot-dnsutils) are the real DNS clients of the authdns tests; chromium is
# the browser of the SDK's end-to-end tests (sdk/js/e2e).
need=()
command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
command -v kdig >/dev/null 2>&1 || need+=(knot-dnsutils)
[ -x /usr/bin/chromium ] || need+=(chromium)
if ((${#need[@]})); then
	sudo=""
	if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
	echo "scripts/test.sh: installing ${need[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The browser SDK (sdk/js) builds and tests with Node.js 20.19 or later and
# npm; its packages come from package-lock.json, installed again only when
# node_modules is missing or the lock file changed since the last install.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "scripts/test.sh: the browser SDK's tests (sdk/js) need Node.js 20.19 or later and npm, and this machine has no node or npm" >&2
	exit 1
fi
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
	echo "scripts/test.sh: the browser SDK's tests (sdk/js) need Node.js 20.19 or later; this machine has $(node --version)" >&2
	exit 1
fi
lock_sum=$(sha256sum sdk/js/package-lock.json | cut -d' ' -f1)
stamp=sdk/js/node_modules/.corral-lock-sha256
if [ ! -d sdk/js/node_modules ] || [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]; then
	echo "scripts/test.sh: npm ci in sdk/js" >&2
	(cd sdk/js && npm ci --no-audit --no-fund --loglevel=error)
	echo "$lock_sum" >"$stamp"
fi
(cd sdk/js && node_modules/.bin/tsc --noEmit && node_modules/.bin/vitest run)

# The module's tests; sdk/js/e2e builds the SDK and the corral binary and
# runs them in Chromium.
go test -race -timeout 25m "$@" ./...
