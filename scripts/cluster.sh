#!/usr/bin/env bash
# Runs a 3-node seqd cluster on this machine.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/cluster.sh [--port N] [--dir D] start [extra seqd serve flags] | stop | status

  start    build seqd, start nodes n1..n3 in the background, wait for a leader
  stop     stop them (SIGTERM: a leader hands over before it exits)
  status   seqd status against the cluster

Options (or environment):
  --port N   base port (SEQD_CLUSTER_PORT, default 7710): node i (1..3) listens on
             API 127.0.0.1:N+10(i-1), raft that +1, gossip that +2, the Redis
             protocol that +3 (so by default n1 7710/7711/7712/7713, n2 7720...,
             n3 7730...; redis-cli -p 7713 INCR 42)
  --dir D    where the binary, the data directories D/ni, the logs D/ni.log and
             the pid files go (SEQD_CLUSTER_DIR, default ./seqd-cluster)

Every node gets the same --join list and --bootstrap-expect 3, so they can
start in any order. Give stop and status the same --port and --dir as start.
Examples:
  scripts/cluster.sh start --groups 6
  scripts/cluster.sh --port 9010 --dir /tmp/c2 start   # a second cluster beside the first
USAGE
}

dir=${SEQD_CLUSTER_DIR:-./seqd-cluster}
port=${SEQD_CLUSTER_PORT:-7710}
verb=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help|help) usage; exit 0 ;;
    --port) [ $# -ge 2 ] || { echo "--port needs a number" >&2; exit 2; }; port=$2; shift 2 ;;
    --port=*) port=${1#--port=}; shift ;;
    --dir) [ $# -ge 2 ] || { echo "--dir needs a directory" >&2; exit 2; }; dir=$2; shift 2 ;;
    --dir=*) dir=${1#--dir=}; shift ;;
    *) if [ -z "$verb" ]; then verb=$1; else extra+=("$1"); fi; shift ;;
  esac
done
case "$port" in
  ''|*[!0-9]*) echo "--port must be a number, got '$port'" >&2; exit 2 ;;
esac
if [ "$port" -lt 1 ] || [ "$port" -gt 65500 ]; then echo "--port must be 1 to 65500, got $port" >&2; exit 2; fi

cd "$(dirname "$0")/.."
bin=$dir/seqd
api() { echo "127.0.0.1:$((port + 10 * ($1 - 1)))"; }
raft() { echo "127.0.0.1:$((port + 10 * ($1 - 1) + 1))"; }
gossip() { echo "127.0.0.1:$((port + 10 * ($1 - 1) + 2))"; }
redis() { echo "127.0.0.1:$((port + 10 * ($1 - 1) + 3))"; }
join=$(gossip 1),$(gossip 2),$(gossip 3)
addrs=$(api 1),$(api 2),$(api 3)

start() {
  mkdir -p "$dir"
  go build -o "$bin" ./cmd/seqd
  for i in 1 2 3; do
    if [ -f "$dir/n$i.pid" ] && kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then
      echo "n$i already running (pid $(cat "$dir/n$i.pid"))"; continue
    fi
    "$bin" serve --id "n$i" --data-dir "$dir/n$i" \
      --api-addr "$(api "$i")" --raft-addr "$(raft "$i")" --gossip-addr "$(gossip "$i")" \
      --redis-addr "$(redis "$i")" \
      --join "$join" --bootstrap-expect 3 "$@" >>"$dir/n$i.log" 2>&1 &
    echo $! >"$dir/n$i.pid"
    echo "started n$i (pid $!, API $(api "$i"), Redis protocol $(redis "$i"), log $dir/n$i.log)"
  done
  for _ in $(seq 1 100); do
    if "$bin" status --addr "$addrs" --timeout 1s 2>/dev/null | grep -Eq ' leader +true'; then
      "$bin" status --addr "$addrs"
      echo
      echo "try: $bin next --addr $addrs 42"
      return 0
    fi
    sleep 0.2
  done
  echo "no leader after 20s; see $dir/n*.log" >&2
  return 1
}

stop() {
  for i in 1 2 3; do
    f=$dir/n$i.pid
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      echo "stopped n$i (pid $pid)"
    fi
    rm -f "$f"
  done
}

case "$verb" in
  start) start ${extra[@]+"${extra[@]}"} ;;
  stop) stop ;;
  status) "$bin" status --addr "$addrs" ;;
  *) usage >&2; exit 2 ;;
esac
