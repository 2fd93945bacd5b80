#!/usr/bin/env bash
# Regenerates api/gen from api/proto with buf and the protoc plugins pinned in
# go.mod (go tool protoc-gen-go, go tool protoc-gen-connect-go).
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
