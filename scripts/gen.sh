#!/usr/bin/env bash
# Regenerates api/gen (Go) from api/proto with buf and the protoc plugins
# pinned in go.mod (go tool protoc-gen-go, go tool protoc-gen-connect-go), and
# client/web/src/gen (TypeScript) with protoc-gen-es pinned in
# client/web/package.json (installed with npm ci when missing).
# Usage: scripts/gen.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUF_VERSION=v1.75.0
export PATH="$(go env GOPATH)/bin:$PATH"
if ! command -v buf >/dev/null || [ "$(buf --version 2>/dev/null)" != "${BUF_VERSION#v}" ]; then
  echo "installing buf ${BUF_VERSION}" >&2
  GOFLAGS= go install "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}"
fi
buf lint
buf generate
[ -x client/web/node_modules/.bin/protoc-gen-es ] || (cd client/web && npm ci --no-audit --no-fund)
buf generate --template client/web/buf.gen.yaml
