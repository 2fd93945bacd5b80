#!/usr/bin/env bash
# Runs one workload against Redis, PostgreSQL, etcd (3 members), a bare
# connect-go handler and a 3-node seqd cluster, all on loopback on this
# machine, and writes a markdown table (medians of $RUNS runs).
#
#   scripts/compare.sh                 everything, defaults below
#   DURATION=5s RUNS=1 scripts/compare.sh     a quick pass
#   ONLY=headline RUNS=5 scripts/compare.sh   the headline: seqd on its defaults
#              (3 servers, 3 raft groups, nothing pinned) and with --groups 1
#              against Redis INCR through rueidis and go-redis at 1, 16, 64
#              and 256 callers, the tail at 25/50/75 % of seqd's peak, and CPU
#              per id; headline.md has the ratios
#
# Environment:
#   OUT        result directory (default bench-results/<date>); one JSON per run
#              set, table.md, machine.txt, and the servers' logs
#   DURATION   measured time per run (default 10s), after WARMUP (default 2s)
#   RUNS       rounds: each measurement runs once per round, in turns with the
#              others; the median of the rounds is reported (default 3)
#   CONCS      concurrencies (default "1 16 64 256")
#   KEYS       distinct keys, uniform (default 1000000)
#   BENCH_REQUESTS  requests of each redis-benchmark run (default 1000000 below
#              16 connections, 4000000 from 16)
#   ONLY       space-separated subset of: redis rueidis redis-bench postgres
#              etcd baseline seqd seqd-g1 seqd-unary seqd-h2c seqd-batch
#              seqd-half tail transports seqd-ids seqd-resp leaf memory (default
#              all);
#              "headline" stands for "redis rueidis seqd seqd-g1 tail"
#              seqd: the cluster on seqd's defaults (3 raft groups on 3
#              servers; SEQD_GROUPS changes it); seqd-g1: a second cluster
#              with --groups 1, in the same rounds; tail: open loop at 25, 50
#              and 75 % of the round's seqd peak at 64 callers, seqd and
#              rueidis at the same rates from the same generator (latency
#              from each call's scheduled start); seqd-half: the same three
#              rates for seqd alone, and the bare handler at half;
#              transports: 64 callers of the Go client with its coalesced
#              requests as unary calls (the default before NextStream) and on
#              Connect's HTTP/2 stream, next to the headline's framed stream;
#              inflight: 64 callers with 2 and 4 coalesced requests in flight
#              per space and group (the default is 1); not in the default set
#              seqd-resp: seqd's Redis protocol front end through rueidis
#              and redis-benchmark (with Redis through both, -r as for
#              seqd); leaf: Leaf's GET /api/segment/get/{tag} over HTTP/1.1
#              keep-alive
#   MAX_LOAD   wait (polling every 30s, at most 20 minutes) until the 1-minute
#              load average is below this before starting (default 0.5; 0: don't wait)
#   INSTALL    1 (default): apt-get install the servers if missing
#   PORT_BASE  first port used (default 19000); ports PORT_BASE..PORT_BASE+83
#   SEQD_GROUPS raft groups of the seqd cluster (default: seqd's own, one per
#              bootstrap server: 3)
#   PIN        1: run every server on CPU 0 and every load tool on CPU 1
#              (taskset), so that a load tool and the servers it measures never
#              share a core, as when clients run on other machines (default 0)
#
# Every row also reports CPU time per id (the "client" and "server" CPU
# µs/id columns, from /proc over each measured run): the load tool's own
# process (the load generator and the client under test) and the servers it
# measures (seqd's 3 processes; redis-server; the baseline; etcd's 3
# members; PostgreSQL's are not counted).
#
# Every server is started by this script as its own process in a temporary
# directory, listening on 127.0.0.1 only, and stopped (by PID) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH="/usr/local/go/bin:$PATH"

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-3}
CONCS=${CONCS:-"1 16 64 256"}
KEYS=${KEYS:-1000000}
ONLY=${ONLY:-"redis rueidis redis-bench postgres etcd baseline seqd seqd-g1 seqd-unary seqd-h2c seqd-batch seqd-half tail transports seqd-ids seqd-resp leaf memory"}
ONLY=${ONLY//headline/redis rueidis seqd seqd-g1 tail}
MAX_LOAD=${MAX_LOAD:-0.5}
INSTALL=${INSTALL:-1}
PIN=${PIN:-0}
srv=() load=()
if [ "$PIN" = 1 ]; then srv=(taskset -c 0) load=(taskset -c 1); fi
P=${PORT_BASE:-19000}
OUT=${OUT:-bench-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

want() { [[ " $ONLY " == *" $1 "* ]]; }
log() { echo "== $(date +%H:%M:%S) $*" >&2; }

# ---- the servers ----------------------------------------------------------
if [ "$INSTALL" = 1 ]; then
  missing=()
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v redis-benchmark >/dev/null || missing+=(redis-tools)
  [ -x /usr/lib/postgresql/15/bin/postgres ] || command -v pg_ctl >/dev/null || missing+=(postgresql)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v etcdctl >/dev/null || missing+=(etcd-client)
  command -v python3 >/dev/null || missing+=(python3)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

work=$(mktemp -d /tmp/seqd-compare.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  cp "$work"/*.log "$OUT"/ 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

log "building seqd, seqbench and seqd-compare"
go build -o "$work/seqd" ./cmd/seqd
go build -o "$work/seqbench" ./cmd/seqbench
(cd bench && go build -o "$work/seqd-compare" .)
seqd=$work/seqd
seqbench=$work/seqbench
cmp=$work/seqd-compare

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"
  echo "go: $(go version)"
  echo "nproc: $(nproc)"
  lscpu | head -20 || true
  free -g || true
  redis-server --version || true
  "$pgbin/postgres" --version || true
  etcd --version | head -1 || true
} >"$OUT/machine.txt" 2>&1

if [ "$MAX_LOAD" != 0 ]; then
  for i in $(seq 1 40); do
    l=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$l" -v m="$MAX_LOAD" 'BEGIN { exit !(l < m) }'; then break; fi
    [ "$i" = 40 ] && { log "load still $l after 20 minutes; going on"; break; }
    log "1-minute load $l >= $MAX_LOAD: waiting 30s"
    sleep 30
  done
fi
echo "load before start: $(cat /proc/loadavg)" >>"$OUT/machine.txt"
echo "PIN=$PIN (1: servers on CPU 0, load tools on CPU 1)" >>"$OUT/machine.txt"

redis_port=$P
pg_port=$((P + 1))
etcd_c=($((P + 10)) $((P + 12)) $((P + 14)))
etcd_p=($((P + 11)) $((P + 13)) $((P + 15)))
seqd_api=($((P + 20)) $((P + 30)) $((P + 40)))
base_port=$((P + 50))
g1_api=($((P + 60)) $((P + 70)) $((P + 80)))
seqd_addrs=127.0.0.1:${seqd_api[0]},127.0.0.1:${seqd_api[1]},127.0.0.1:${seqd_api[2]}
g1_addrs=127.0.0.1:${g1_api[0]},127.0.0.1:${g1_api[1]},127.0.0.1:${g1_api[2]}
etcd_addrs=127.0.0.1:${etcd_c[0]},127.0.0.1:${etcd_c[1]},127.0.0.1:${etcd_c[2]}

redis_pid="" base_pid=""
if want redis || want rueidis || want redis-bench || want seqd-resp; then
  log "starting redis on :$redis_port (in memory: no RDB, no AOF)"
  mkdir -p "$work/redis"
  "${srv[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/redis" \
    --daemonize no --protected-mode no >"$work/redis.log" 2>&1 &
  pids+=($!)
  redis_pid=$!
fi
if want postgres; then
  log "starting postgresql on :$pg_port (defaults: fsync on, synchronous_commit on)"
  mkdir -p "$work/pg" "$work/pgsock"
  chown postgres: "$work/pg" "$work/pgsock"
  setpriv --reuid=postgres --regid=postgres --init-groups "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >"$work/initdb.log" 2>&1
  "${srv[@]}" setpriv --reuid=postgres --regid=postgres --init-groups "$pgbin/postgres" -D "$work/pg" -p "$pg_port" \
    -k "$work/pgsock" -c listen_addresses=127.0.0.1 -c max_connections=300 >"$work/postgres.log" 2>&1 &
  pids+=($!)
fi
if want etcd; then
  log "starting etcd, 3 members"
  cluster=e1=http://127.0.0.1:${etcd_p[0]},e2=http://127.0.0.1:${etcd_p[1]},e3=http://127.0.0.1:${etcd_p[2]}
  for i in 0 1 2; do
    "${srv[@]}" etcd --name "e$((i + 1))" --data-dir "$work/etcd$i" \
      --listen-client-urls "http://127.0.0.1:${etcd_c[$i]}" --advertise-client-urls "http://127.0.0.1:${etcd_c[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${etcd_p[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${etcd_p[$i]}" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token seqd-compare \
      >"$work/etcd$i.log" 2>&1 &
    pids+=($!)
    etcd_pids+=${etcd_pids:+,}$!
  done
fi
if want baseline; then
  log "starting the bare connect-go baseline on :$base_port"
  "${srv[@]}" "$seqbench" baseline-server --listen "127.0.0.1:$base_port" >"$work/baseline.log" 2>&1 &
  pids+=($!)
  base_pid=$!
fi
# start_seqd NAME API-PORTS... -- FLAGS: a 3-node cluster, the nodes' PIDs
# comma-separated in ${NAME}_pids.
declare -A seqd_pid=()
start_seqd() {
  local name=$1 a i join="" list=""; shift
  local ports=("$1" "$2" "$3"); shift 3
  for a in "${ports[@]}"; do join+=${join:+,}127.0.0.1:$((a + 2)); done
  for i in 0 1 2; do
    a=${ports[$i]}
    "${srv[@]}" "$seqd" serve --id "n$((i + 1))" --data-dir "$work/$name$i" --api-addr "127.0.0.1:$a" \
      --raft-addr "127.0.0.1:$((a + 1))" --gossip-addr "127.0.0.1:$((a + 2))" --redis-addr "127.0.0.1:$((a + 3))" \
      --join "$join" --bootstrap-expect 3 "$@" >"$work/$name$i.log" 2>&1 &
    pids+=($!)
    list+=${list:+,}$!
    [ "$name" = seqd ] && seqd_pid[n$((i + 1))]=$!
  done
  printf -v "${name}_pids" '%s' "$list"
}
if want seqd || want seqd-unary || want seqd-h2c || want seqd-batch || want seqd-half || want tail || want transports || want inflight || want seqd-ids || want seqd-resp || want leaf || want memory; then
  log "starting seqd, 3 nodes (${SEQD_GROUPS:+--groups $SEQD_GROUPS, }defaults otherwise)"
  start_seqd seqd "${seqd_api[@]}" ${SEQD_GROUPS:+--groups "$SEQD_GROUPS"}
fi
if want seqd-g1; then
  log "starting seqd with --groups 1, 3 nodes"
  start_seqd g1 "${g1_api[@]}" --groups 1
fi

ready() { # what, command...
  local what=$1; shift
  for _ in $(seq 1 150); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "$what did not come up; logs in $work" >&2
  exit 1
}
if want redis || want rueidis || want redis-bench || want seqd-resp; then ready redis redis-cli -p "$redis_port" ping; fi
if want postgres; then ready postgres "$pgbin/pg_isready" -h 127.0.0.1 -p "$pg_port"; fi
if want etcd; then ready etcd etcdctl --endpoints "$etcd_addrs" endpoint health; fi
if [ ${#seqd_pid[@]} -gt 0 ]; then
  ready seqd sh -c "'$seqd' status --addr '$seqd_addrs' --timeout 1s | grep -Eq ' leader +true'"
  # Several groups: wait (up to a minute) until the balancer has given each
  # server its share of leaders and every group serves, so that no run sees
  # a group move.
  for _ in $(seq 1 120); do
    st=$("$seqd" status --addr "$seqd_addrs" --timeout 2s 2>/dev/null || true)
    if [ -n "$st" ] && ! grep -q '^groups: ' <<<"$st"; then break; fi # one group
    led=$(sed -n 's/^groups led: //p' <<<"$st")
    if [ -n "$led" ] && [ "$(tr ',' '\n' <<<"$led" | awk '{print $2}' | sort -u | wc -l)" = 1 ] &&
      ! awk '/^GROUP /{g=1; next} g && NF==0 {g=0} g && $3=="false"' <<<"$st" | grep -q .; then break; fi
    sleep 0.5
  done
  "$seqd" status --addr "$seqd_addrs" >>"$OUT/machine.txt"
  # The spaces of the Redis front end's keys: seqd:N (seqd-compare's) and
  # counter:N (redis-benchmark's).
  if want seqd-resp; then
    "$seqd" space create seqd --addr "$seqd_addrs" >/dev/null
    "$seqd" space create counter --addr "$seqd_addrs" >/dev/null
  fi
fi
# serves ADDRS: wait (up to a minute) until a short load through the Go
# client succeeds: every group's leader serves.
serves() {
  for _ in $(seq 1 30); do
    "$seqbench" --addr "$1" --progress 0 --concurrency 8 --count 2000 --warmup 0 --timeout 2s >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "seqd at $1 did not serve a short load in a minute; logs in $work" >&2
  exit 1
}
if [ ${#seqd_pid[@]} -gt 0 ]; then serves "$seqd_addrs"; fi
if want seqd-g1; then
  ready seqd-g1 sh -c "'$seqd' status --addr '$g1_addrs' --timeout 1s | grep -Eq ' leader +true'"
  serves "$g1_addrs"
  "$seqd" status --addr "$g1_addrs" >>"$OUT/machine.txt"
fi

# ---- the runs ----------------------------------------------------------
# Rounds: every target runs once per round, in turns, so that the machine's
# changing load (other jobs) falls on all of them alike; after $RUNS rounds
# each target's median run is reported. Every run records the 1-minute load
# average before and after it.
mkdir -p "$OUT/runs"
common=(--duration "$DURATION" --warmup "$WARMUP" --keys "$KEYS" --json)
# cpu_mark/cpu_note: the machine's CPU split over one run (from /proc/stat),
# appended to runs/cpu.tsv: on a VM, steal is time the hypervisor gave to
# someone else, and it moves throughput and tails more than anything here.
cpu_mark() { cpu0=($(head -1 /proc/stat)); }
cpu_note() { # name
  local c=($(head -1 /proc/stat)) i d=() t=0
  for i in 1 2 3 4 5 6 7 8; do d[$i]=$((c[i] - cpu0[i])); t=$((t + d[i])); done
  [ "$t" -gt 0 ] || t=1
  printf '%s\t%s\tuser %d%%\tsys %d%%\tidle %d%%\tsoftirq %d%%\tsteal %d%%\n' "$1" "$r" \
    $((100 * d[1] / t)) $((100 * d[3] / t)) $((100 * d[4] / t)) $((100 * d[7] / t)) $((100 * d[8] / t)) >>"$OUT/runs/cpu.tsv"
}
sq() { # name, seqbench flags... (against the default cluster unless --addr)
  local name=$1; shift
  log "round $r: $name (load $(cut -d' ' -f1 /proc/loadavg))"
  cpu_mark
  "${load[@]}" "$seqbench" --progress 0 "${common[@]}" "$@" >"$OUT/runs/$name.r$r.json"
  cpu_note "$name"
}
sd() { # name, seqbench flags...: the cluster on seqd's defaults, its CPU counted
  local name=$1; shift
  sq "$name" --addr "$seqd_addrs" --cpu-pids "$seqd_pids" "$@"
}
cp_() { # name, seqd-compare flags...
  local name=$1; shift
  log "round $r: $name (load $(cut -d' ' -f1 /proc/loadavg))"
  cpu_mark
  "${load[@]}" "$cmp" "${common[@]}" --label "$name" "$@" >"$OUT/runs/$name.r$r.json" 2>>"$OUT/runs/$name.log"
  cpu_note "$name"
}
redis_bench() { # concurrency [port name extra...]: redis-benchmark's own pipelined INCR, 16 deep
  local c=$1 port=${2:-$redis_port} name=${3:-redis-benchmark-incr-P16-c$1} l0 rate
  shift $(($# < 3 ? $# : 3))
  log "round $r: $name (load $(cut -d' ' -f1 /proc/loadavg))"
  l0=$(cut -d' ' -f1 /proc/loadavg)
  cpu_mark
  # Its output is kept next to the row; a run that fails (redis-benchmark
  # stops at the first error reply) is logged and counted as 0, the other
  # rows go on, and compare.sh exits 1 at the end.
  if ! "${load[@]}" redis-benchmark -p "$port" -t incr -P 16 -c "$c" -n "${BENCH_REQUESTS:-$((c < 16 ? 1000000 : 4000000))}" -q "$@" \
    >"$OUT/runs/$name.r$r.out" 2>&1; then
    log "round $r: $name: redis-benchmark failed: $(tr '\r' '\n' <"$OUT/runs/$name.r$r.out" | grep -v 'rps=' | grep . | tail -1)"
    failed_rows+=("$name.r$r")
  fi
  rate=$(tr '\r' '\n' <"$OUT/runs/$name.r$r.out" | { grep -Eo 'INCR: [0-9.]+' || true; } | tail -1 | awk '{print $2}')
  printf '{"target":"redis-benchmark","label":"%s","median":{"concurrency":%s,"batch":16,"calls_per_s":%s,"ids_per_s":%s,"latency":{}},"load_1m":[%s,%s]}\n' \
    "$name" "$c" "${rate:-0}" "${rate:-0}" "$l0" "$(cut -d' ' -f1 /proc/loadavg)" >"$OUT/runs/$name.r$r.json"
  cpu_note "$name"
}
failed_rows=()
median_ids() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['median']['ids_per_s'])" "$1"; }

for r in $(seq 1 "$RUNS"); do
  for c in $CONCS; do
    want redis && cp_ "redis-incr-c$c" --target redis --addr "127.0.0.1:$redis_port" --concurrency "$c" --cpu-pids "$redis_pid"
    # rueidis pipelines the callers' commands over one connection.
    want rueidis && cp_ "redis-incr-rueidis-c$c" --target rueidis --addr "127.0.0.1:$redis_port" --concurrency "$c" \
      --cpu-pids "$redis_pid"
    want redis-bench && redis_bench "$c"
    if want seqd-resp; then
      # seqd's Redis front end on n1 (whose leaders follow its traffic
      # there: docs/groups.md) and Redis, through the same clients, with
      # the CPU of every server; seqd needs numeric keys, so
      # redis-benchmark runs with -r on both.
      cp_ "seqd-resp-incr-rueidis-c$c" --target rueidis --addr "127.0.0.1:$((seqd_api[0] + 3))" --concurrency "$c" \
        --cpu-pids "$seqd_pids"
      cp_ "redis-incr-rueidis-c$c-again" --target rueidis --addr "127.0.0.1:$redis_port" --concurrency "$c" \
        --cpu-pids "$redis_pid"
      redis_bench "$c" "$((seqd_api[0] + 3))" "seqd-resp-redis-benchmark-incr-P16-r-c$c" -r 1000000
      redis_bench "$c" "$redis_port" "redis-benchmark-incr-P16-r-c$c" -r 1000000
    fi
    # Leaf's HTTP API: GET /api/segment/get/default (key 0 of the default
    # space), spread over the three servers.
    want leaf && cp_ "seqd-leaf-get-c$c" --target http-get --concurrency "$c" \
      --addr "http://127.0.0.1:${seqd_api[0]}/api/segment/get/default,http://127.0.0.1:${seqd_api[1]}/api/segment/get/default,http://127.0.0.1:${seqd_api[2]}/api/segment/get/default"
    want postgres && cp_ "postgres-nextval-c$c" --target postgres --concurrency "$c" \
      --addr "host=127.0.0.1 port=$pg_port user=postgres dbname=postgres sslmode=disable"
    want etcd && cp_ "etcd-cas-c$c" --target etcd --addr "$etcd_addrs" --concurrency "$c" --cpu-pids "$etcd_pids"
    # The bare handler and seqd's unary Next back to back, for their ratio.
    want baseline && sq "baseline-connect-unary-c$c" --addr "127.0.0.1:$base_port" --no-raft-stats --coalesce=false \
      --concurrency "$c" --cpu-pids "$base_pid"
    want seqd-unary && sd "seqd-next-unary-c$c" --coalesce=false --concurrency "$c"
    # The headline: the Go client on its defaults (coalesced requests as
    # NextStream messages) against the cluster on seqd's defaults; the same
    # against a cluster of one raft group.
    want seqd && sd "seqd-next-coalesced-c$c" --concurrency "$c"
    if want inflight && [ "$c" = 64 ]; then
      # The same 64 callers with more coalesced requests in flight per
      # space and group (smaller requests; the client's default is 1),
      # right after the default row so that the three see the same machine.
      sd "seqd-next-coalesced-inflight4-c64" --concurrency 64 --max-in-flight 4
      sd "seqd-next-coalesced-inflight2-c64" --concurrency 64 --max-in-flight 2
    fi
    want seqd-g1 && sq "seqd-g1-next-coalesced-c$c" --addr "$g1_addrs" --cpu-pids "$g1_pids" --concurrency "$c"
    # Flake ids, service mode: NextIds of one id per call, each node from
    # its own worker (the client coalesces concurrent calls).
    want seqd-ids && sd "seqd-ids-coalesced-c$c" --concurrency "$c" --mix ids=1
  done
  if want seqd-ids; then
    # Batches of 1000 flake ids (against seqd-reserve1000-c16): as ids, and
    # as runs of consecutive ids (NextIdRuns, the form Reserve's answer
    # has); and an embedded generator per caller (no RPC per id).
    sd "seqd-ids1000-c16" --concurrency 16 --mix ids=1 --batch 1000
    sd "seqd-runs1000-c16" --concurrency 16 --mix runs=1 --batch 1000
    sd "seqd-embedded-c64" --concurrency 64 --mix embedded=1
  fi
  if want transports; then
    # The same 64 callers, the coalesced requests as unary calls (HTTP/1.1,
    # the client's way before NextStream) and on Connect's HTTP/2 stream.
    sd "seqd-next-coalesced-unary-c64" --concurrency 64 --stream false
    sd "seqd-next-coalesced-connect-stream-c64" --concurrency 64 --stream connect
  fi
  if want seqd-h2c; then
    # 64 callers over h2c (the Go client's default for Connect is HTTP/1.1).
    want baseline && sq "baseline-connect-unary-h2c-c64" --addr "127.0.0.1:$base_port" --no-raft-stats --coalesce=false \
      --concurrency 64 --http2 --cpu-pids "$base_pid"
    sd "seqd-next-unary-h2c-c64" --coalesce=false --concurrency 64 --http2
    # Coalesced unary requests (no stream) over h2c.
    sd "seqd-next-coalesced-unary-h2c-c64" --concurrency 64 --http2 --stream false
  fi
  if { want seqd-half || want tail; } && [ -f "$OUT/runs/seqd-next-coalesced-c64.r$r.json" ]; then
    # Open loop at a quarter, half and three quarters of this round's peak
    # of 64 coalesced callers; with tail, Redis through rueidis at the same
    # rates from the same generator, each right after seqd's run.
    peak=$(median_ids "$OUT/runs/seqd-next-coalesced-c64.r$r.json")
    half=$(python3 -c "print(int($peak/2))")
    for part in quarter:4 half:2 3q:1.3333333; do
      rate=$(python3 -c "print(int($peak/${part#*:}))")
      sd "seqd-next-coalesced-c64-${part%%:*}-peak" --concurrency 64 --rate "$rate"
      want tail && want rueidis && cp_ "redis-incr-rueidis-c64-seqd-${part%%:*}-peak" --target rueidis \
        --addr "127.0.0.1:$redis_port" --concurrency 64 --rate "$rate" --cpu-pids "$redis_pid"
    done
    # The bare handler behind the same client at the same rate: the tail
    # that the HTTP stack and the machine add without seqd.
    want seqd-half && want baseline && sq "baseline-coalesced-c64-seqd-half-peak" --addr "127.0.0.1:$base_port" --no-raft-stats \
      --concurrency 64 --rate "$half" --cpu-pids "$base_pid"
  fi
  if want seqd-batch; then
    sd "seqd-reserve1000-c16" --concurrency 16 --mix reserve=1 --batch 1000
    sd "seqd-next1000keys-c16" --concurrency 16 --batch 1000 --coalesce=false
    # One hot key: every value from one section, so raises (raft entries)
    # come at ids/step per second.
    sd "seqd-next-hotkey-c64" --concurrency 64 --keys 1 --key-offset 5000000
  fi
done

for f in "$OUT"/runs/*.r1.json; do
  name=$(basename "$f" .r1.json)
  "$cmp" merge "$OUT/$name.json" "$OUT"/runs/"$name".r*.json
done

if want memory; then
  # 10 million distinct keys through Next (1000 keys per call), then the
  # resident memory of the servers (every raft group's leader holds its
  # groups' keys: the sum over the 3 processes).
  rss() { local p t=0; for p in "${seqd_pid[@]}"; do t=$((t + $(awk '/VmRSS/ {print $2}' "/proc/$p/status"))); done; echo "$t"; }
  rss0=$(rss)
  log "memory: 10M keys (servers' RSS ${rss0} kB before)"
  "$seqbench" --progress 0 --addr "$seqd_addrs" --concurrency 8 --batch 1000 --dist sequential \
    --keys 10000000 --key-offset 100000000 --count 10000 --warmup 0 --json >"$OUT/runs/memory-10M-keys.json"
  sleep 2
  rss1=$(rss)
  echo "{\"servers\":3,\"keys\":10000000,\"rss_before_kb\":$rss0,\"rss_after_kb\":$rss1,\"bytes_per_key\":$(( (rss1 - rss0) * 1024 / 10000000 ))}" \
    >"$OUT/memory.json"
  cat "$OUT/memory.json" >&2
fi

echo "load after: $(cat /proc/loadavg)" >>"$OUT/machine.txt"
"$cmp" table "$OUT"/*.json >"$OUT/table.md"
cat "$OUT/table.md"
python3 "$root/scripts/headline.py" "$OUT" >"$OUT/headline.md"
cat "$OUT/headline.md"
log "results in $OUT"
if [ "${#failed_rows[@]}" -gt 0 ]; then
  log "FAILED rows (their output is in $OUT/runs): ${failed_rows[*]}"
  exit 1
fi
