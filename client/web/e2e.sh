#!/usr/bin/env bash
# End-to-end test of the browser client and the status page: runs the unit
# tests (npm test), builds seqd and ui/cmd/uitest, starts 3-node clusters (one
# of them with 3 raft groups) on 127.0.0.1, and drives Debian's chromium
# (headless, through playwright-core) against them; see e2e/ui.e2e.mjs.
# Installs what it needs: chromium from apt when /usr/bin/chromium is missing
# (never a browser download), and the npm packages (npm ci).
# Usage: client/web/e2e.sh     (E2E_OUT=dir keeps screenshots and node logs there;
#        SEQD_BIN=path uses an already built seqd)
set -euo pipefail
cd "$(dirname "$0")"
web=$(pwd)
root=$(cd ../.. && pwd)

export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "== installing chromium (apt)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
"$CHROMIUM" --version

echo "== npm ci"
npm ci --no-audit --no-fund

echo "== type-check and bundle (ui/static/app.js)"
npm run --silent build

echo "== unit tests (slot function, routing by raft group, coalescing, the refusing-raft pill)"
npm test --silent

tmp=$(mktemp -d "${TMPDIR:-/tmp}/seqd-web-e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "== go build seqd, uitest"
if [ -z "${SEQD_BIN:-}" ]; then
  (cd "$root" && go build -o "$tmp/seqd" ./cmd/seqd)
  SEQD_BIN="$tmp/seqd"
fi
(cd "$root" && go build -o "$tmp/uitest" ./ui/cmd/uitest)

echo "== browser test"
export SEQD_BIN UITEST_BIN="$tmp/uitest"
export E2E_OUT=${E2E_OUT:-$tmp/out}
timeout 300 node e2e/ui.e2e.mjs
