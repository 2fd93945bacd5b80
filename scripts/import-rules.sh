#!/usr/bin/env bash
# Checks the layering rules of the module's package documentation (doc.go,
# "Layout of the module"): which packages may
# import which. Exits 1 and names every broken rule.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/seqd/seqd
fail=0
go list -deps ./... >/dev/null # fails (set -e) on an import cycle or a missing package

# deps PKG: every package PKG imports, directly or not (tests excluded).
deps() { go list -deps "$1"; }
# direct PKG: the packages PKG's own files import.
direct() { go list -f '{{join .Imports "\n"}}' "$1"; }

# forbid PKG PATTERN REASON: PKG must not depend on a package matching PATTERN.
forbid() {
  local pkg=$1 pattern=$2 reason=$3 bad
  bad=$(deps "$pkg" | grep -E "$pattern" || true)
  if [ -n "$bad" ]; then
    echo "import rule broken: $pkg $reason; it imports:"; echo "$bad" | sed 's/^/  /'
    fail=1
  fi
}

# The root package imports only the standard library.
bad=$(go list -f '{{join .Imports "\n"}}' "$mod" | grep '\.' || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod imports more than the standard library:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

for p in sections fsm; do
  forbid "$mod/$p" "^$mod/(group|cluster|api|server)(/|$)" "must not import group/, cluster/, api/ or server/"
done
forbid "$mod/sections" "^github.com/hashicorp/raft" "is the pure allocator and must not import raft"
forbid "$mod/group" "^$mod/(cluster|api|server)(/|$)" "must not import cluster/, api/ or server/ (cluster/ owns the groups)"
forbid "$mod/cluster" "^$mod/(api|server)(/|$)" "must not import api/ or server/"
bad=$(direct "$mod/api" | grep -E "^$mod/(fsm|sections)(/|$)" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/api talks to groups through cluster/ and group/, never fsm/ or sections/; it imports:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
# flake/ is pure (the embedded generator in client/ uses it): the standard
# library, the root package, bootclock/ and its own packages only.
bad=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$mod/flake/..." "$mod/bootclock" | grep -vE "^$mod(/flake(/.*)?|/bootclock)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/flake or bootclock/ imports more than the standard library, the root package and bootclock/:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
bad=$(deps "$mod/client" | grep "^$mod" | grep -vE "^$mod(/client|/flake(/.*)?|/bootclock|/api/idmsg|/api/frame|/api/gen/.*)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/client imports more than the root package, flake/, bootclock/, api/idmsg, api/frame and generated code:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
# api/idmsg is the one conversion between the IdService messages and
# flake's types, shared by api/ and client/ (which never imports api/):
# the root package, flake/ and generated code only.
bad=$(deps "$mod/api/idmsg" | grep "^$mod" | grep -vE "^$mod(/api/idmsg|/flake(/.*)?|/bootclock|/api/gen/.*)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/api/idmsg imports more than the root package, flake/ and generated code:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
# api/frame is NextStream's framed transport on the wire, shared by api/
# and client/: the root package and generated code only.
bad=$(deps "$mod/api/frame" | grep "^$mod" | grep -vE "^$mod(/api/frame|/api/gen/.*)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/api/frame imports more than the root package and generated code:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

# cluster/traffic is the pure placement by traffic: the standard library only.
bad=$(go list -f '{{join .Imports "\n"}}' "$mod/cluster/traffic" | grep '\.' || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/cluster/traffic imports more than the standard library:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

# lease/ is the pure lease rules (group/, fsm/ and the model checker call
# them): the standard library only.
bad=$(go list -f '{{join .Imports "\n"}}' "$mod/lease" | grep '\.' || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/lease imports more than the standard library:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

# cluster/admit is the pure admission decision: the standard library and
# the root package only.
bad=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$mod/cluster/admit" | grep -vE "^$mod(/cluster/admit)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/cluster/admit imports more than the standard library and the root package:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

# internal/leasemodel is the pure model of the lease protocol and
# admission: it calls the decisions the servers call (lease/,
# cluster/admit) and never raft, cluster/, group/ or fsm/.
bad=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$mod/internal/leasemodel" | grep -vE "^$mod(/internal/leasemodel|/lease|/cluster/admit)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/internal/leasemodel imports more than the standard library, the root package, lease/ and cluster/admit:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
# resp/ speaks the Redis protocol over a Backend it is given (api's
# in-process calls): it never routes or serves a call itself.
bad=$(deps "$mod/resp" | grep "^$mod" | grep -vE "^$mod(/resp)?$" || true)
if [ -n "$bad" ]; then echo "import rule broken: $mod/resp imports more than the root package:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

[ $fail = 0 ] && echo "import rules: ok"
exit $fail
