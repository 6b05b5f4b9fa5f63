#!/usr/bin/env bash
# fetch-uplot.sh: refreshes the committed uPlot files of internal/chart from
# npm (the Go build never runs Node.js; it embeds what this script copied):
#   npm pack uplot@$VERSION, then dist/uPlot.iife.min.js, dist/uPlot.min.css
#   and LICENSE (as LICENSE.uPlot) into this folder.
# Usage: bash internal/chart/assets/fetch-uplot.sh [VERSION]
set -euo pipefail
version=${1:-1.6.32}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null && tar xzf "uplot-$version.tgz")
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$here/"
cp "$tmp/package/LICENSE" "$here/LICENSE.uPlot"
echo "uplot $version copied into $here (update the version in internal/chart/README.md)"
