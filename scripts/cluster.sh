#!/usr/bin/env bash
# Runs a 3-node seqd cluster on this machine.
#
#   scripts/cluster.sh start    build seqd, start nodes n1..n3 in the background
#   scripts/cluster.sh stop     stop them (SIGTERM: the leader hands over first)
#   scripts/cluster.sh status   seqd status against the cluster
#
# Node i (1..3) listens on API 127.0.0.1:77i0, raft 77i1, gossip 77i2, the
# Redis protocol 77i3 (redis-cli -p 7713 INCR 42), keeps
# its data in $SEQD_CLUSTER_DIR/ni (default ./seqd-cluster/ni) and logs to
# $SEQD_CLUSTER_DIR/ni.log. Every node gets the same --join list and
# --bootstrap-expect 3, so they can start in any order.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SEQD_CLUSTER_DIR:-./seqd-cluster}
bin=$dir/seqd
join=127.0.0.1:7712,127.0.0.1:7722,127.0.0.1:7732
addrs=127.0.0.1:7710,127.0.0.1:7720,127.0.0.1:7730

start() {
  mkdir -p "$dir"
  go build -o "$bin" ./cmd/seqd
  for i in 1 2 3; do
    if [ -f "$dir/n$i.pid" ] && kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then
      echo "n$i already running (pid $(cat "$dir/n$i.pid"))"; continue
    fi
    "$bin" serve --id "n$i" --data-dir "$dir/n$i" \
      --api-addr "127.0.0.1:77${i}0" --raft-addr "127.0.0.1:77${i}1" --gossip-addr "127.0.0.1:77${i}2" \
      --redis-addr "127.0.0.1:77${i}3" \
      --join "$join" --bootstrap-expect 3 "$@" >>"$dir/n$i.log" 2>&1 &
    echo $! >"$dir/n$i.pid"
    echo "started n$i (pid $!, API 127.0.0.1:77${i}0, Redis protocol 127.0.0.1:77${i}3, log $dir/n$i.log)"
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

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  status) "$bin" status --addr "$addrs" ;;
  *) echo "usage: $0 start [extra serve flags] | stop | status" >&2; exit 2 ;;
esac
