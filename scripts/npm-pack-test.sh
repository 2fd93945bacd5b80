#!/usr/bin/env bash
# Packs the TypeScript client (client/web) as npm would publish it, installs
# the tarball in a scratch project, and calls a real seqd node from Node.js
# through it: the ES module (dist/index.js) and its type declarations
# (dist/index.d.ts, checked with tsc), not the sources.
# Usage: scripts/npm-pack-test.sh    (SEQD_BIN=path uses a built seqd;
#        PORT=N puts the node's API on 127.0.0.1:N, raft and gossip on N+1, N+2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
port=${PORT:-7790}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/seqd-npm-pack.XXXXXX")
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

cd "$root/client/web"
[ -d node_modules ] || npm ci --no-audit --no-fund
echo "== npm pack (prepack builds dist/)"
tarball=$(npm pack --silent --pack-destination "$tmp" | tail -1)
tar -tzf "$tmp/$tarball" | sort | sed -n '1,200p' > "$tmp/contents"
for f in package/dist/index.js package/dist/index.d.ts package/package.json package/README.md; do
  grep -qx "$f" "$tmp/contents" || { echo "$tarball lacks $f"; cat "$tmp/contents"; exit 1; }
done
if grep -q '^package/src/' "$tmp/contents"; then echo "$tarball ships its sources"; exit 1; fi
echo "$tarball: $(wc -l < "$tmp/contents") files"

echo "== a scratch project installs it"
mkdir "$tmp/app" && cd "$tmp/app"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent "$tmp/$tarball"

echo "== a real node"
if [ -z "${SEQD_BIN:-}" ]; then (cd "$root" && go build -o "$tmp/seqd" ./cmd/seqd); SEQD_BIN="$tmp/seqd"; fi
"$SEQD_BIN" serve --id npm1 --data-dir "$tmp/data" --api-addr "127.0.0.1:$port" \
  --raft-addr "127.0.0.1:$((port + 1))" --gossip-addr "127.0.0.1:$((port + 2))" > "$tmp/seqd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do "$SEQD_BIN" health --addr "127.0.0.1:$port" >/dev/null 2>&1 && break; sleep 0.1; done

echo "== Node.js calls it through the installed package"
cat > check.mjs <<JS
import assert from "node:assert/strict";
import { createSeqdClient } from "@seqd/web";
const seqd = createSeqdClient("http://127.0.0.1:$port");
const [a, b, c] = await seqd.next("default", [42n, 42n, 7n]);
assert.equal(typeof a, "bigint");
assert.ok(b > a, "a key's values increase");
const { first } = await seqd.reserve("default", 42n, 1000);
assert.ok(first > b);
const [cur] = await seqd.current("default", [42n]);
assert.equal(cur, first + 999n);
const ids = await seqd.nextIds("", 3);
assert.equal(ids.length, 3);
assert.ok(ids[0] < ids[1] && ids[1] < ids[2]);
const grpcWeb = createSeqdClient("http://127.0.0.1:$port", { transport: "grpc-web" });
const [d] = await grpcWeb.next("default", [7n]);
assert.ok(d > c);
console.log("next", a, b, c, "reserve", first, "current", cur, "ids", ids.join(" "), "grpc-web next", d);
JS
node check.mjs

echo "== its type declarations check (tsc, strict, NodeNext)"
cat > check.ts <<'TS'
import { createSeqdClient, type SeqdClient } from "@seqd/web";
const seqd: SeqdClient = createSeqdClient("http://127.0.0.1:7700", { transport: "grpc-web", retryForMs: 1000 });
export async function f(): Promise<bigint> {
  const [v] = await seqd.next("default", [1n]);
  return v;
}
TS
"$root/client/web/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext --target es2020 --skipLibCheck false check.ts
echo "npm pack test: ok"
