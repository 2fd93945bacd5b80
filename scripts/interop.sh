#!/usr/bin/env bash
# Interop: real third-party clients against a running seqd node.
#   grpcurl (list, describe, call, health) through server reflection,
#   buf curl over the Connect, gRPC and gRPC-Web protocols,
#   a stock grpc-go client (interop/, its own module).
# Installs grpcurl and buf with `go install` if missing. Exits non-zero on
# any failure. Usage: scripts/interop.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
GRPCURL_VERSION=v1.9.3
BUF_VERSION=v1.75.0
command -v grpcurl >/dev/null || GOFLAGS= go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@${GRPCURL_VERSION}"
command -v buf >/dev/null || GOFLAGS= go install "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}"

work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/seqd" ./cmd/seqd
addr=127.0.0.1:17800
"$work/seqd" serve --id interop --data-dir "$work/data" --api-addr "$addr" \
  --raft-addr 127.0.0.1:17801 --gossip-addr 127.0.0.1:17802 >"$work/seqd.log" 2>&1 &
pid=$!

check() { # name, expected substring, command...
  local name=$1 want=$2; shift 2
  local out
  if ! out=$("$@" 2>&1) || ! grep -q -- "$want" <<<"$out"; then
    echo "FAIL $name: wanted '$want' in:"; echo "$out"; echo "--- seqd log"; cat "$work/seqd.log"; exit 1
  fi
  echo "ok   $name"
}

for _ in $(seq 1 100); do
  grpcurl -plaintext -d '{"service":"seq.v1.SequenceService"}' "$addr" grpc.health.v1.Health/Check 2>/dev/null | grep -q '"SERVING"' && break
  sleep 0.2
done
check "grpcurl health"   '"status": "SERVING"' grpcurl -plaintext -d '{}' "$addr" grpc.health.v1.Health/Check
check "grpcurl list"     'seq.v1.SequenceService' grpcurl -plaintext "$addr" list
check "grpcurl describe" 'rpc Reserve' grpcurl -plaintext "$addr" describe seq.v1.SequenceService
check "grpcurl call"     '"values"' grpcurl -plaintext -d '{"space":"default","keys":[1,1]}' "$addr" seq.v1.SequenceService/Next
check "grpcurl error"    'Code: NotFound' bash -c "grpcurl -plaintext -d '{\"space\":\"nope\",\"keys\":[1]}' $addr seq.v1.SequenceService/Next || true"
check "buf curl connect" '"values"' buf curl --protocol connect -d '{"keys":[2]}' "http://$addr/seq.v1.SequenceService/Next"
check "buf curl grpc"    '"values"' buf curl --protocol grpc --http2-prior-knowledge -d '{"keys":[2]}' "http://$addr/seq.v1.SequenceService/Next"
check "buf curl grpcweb" '"first"'  buf curl --protocol grpcweb -d '{"key":2,"count":10}' "http://$addr/seq.v1.SequenceService/Reserve"
check "buf curl list"    'seq.v1.AdminService' buf curl --protocol grpc --http2-prior-knowledge --list-services "http://$addr"
check "grpc-go client"   'grpc-go Next' bash -c "cd interop && go run . -addr $addr"
echo "interop: all passed"
