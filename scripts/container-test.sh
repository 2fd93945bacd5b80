#!/usr/bin/env bash
# Builds seqd's container image and runs a 3-node cluster of it, as CI does:
# podman (installed from Debian when missing) builds deploy/container/Containerfile
# (FROM scratch: nothing is pulled) around a static binary built here
# (scripts/build.sh), checks the image's entrypoint, user, exposed ports,
# volume and health check, runs three containers on the host network (runc,
# with nofile/nproc limits from a containers.conf this script writes: crun
# cannot set rlimits in this VM), calls them (Next through the Go client,
# the gRPC health check, the health check of the image, the status page),
# and stops one with SIGTERM, which must leave cleanly (exit 0).
# Usage: scripts/container-test.sh     (PORT=N: node i's API on 127.0.0.1:N+10(i-1),
#        raft +1, gossip +2; default 17710. SEQD_STATIC_BIN=path: a binary
#        scripts/build.sh already made)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
port=${PORT:-17710}
image=localhost/seqd-ci:test
tmp=$(mktemp -d "${TMPDIR:-/tmp}/seqd-container.XXXXXX")
names=(seqd-ci-n1 seqd-ci-n2 seqd-ci-n3)

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
  echo "== installing podman, buildah and runc (apt)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq podman buildah runc >/dev/null
fi
cat > "$tmp/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$tmp/containers.conf"
podman --version

cleanup() {
  for n in "${names[@]}"; do podman rm -f -t 0 "$n" >/dev/null 2>&1 || true; podman volume rm -f "$n" >/dev/null 2>&1 || true; done
  podman rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# A run killed before its trap ran leaves its containers and volumes: their
# names would be refused ("already in use"). Only this test's own names.
for n in "${names[@]}"; do podman rm -f -t 0 "$n" >/dev/null 2>&1 || true; podman volume rm -f "$n" >/dev/null 2>&1 || true; done
cleanup_logs() { for n in "${names[@]}"; do echo "--- $n"; podman logs "$n" 2>&1 | tail -20; done; }

echo "== a static binary (scripts/build.sh) and the image (FROM scratch)"
mkdir -p "$tmp/ctx/data"
if [ -n "${SEQD_STATIC_BIN:-}" ]; then cp "$SEQD_STATIC_BIN" "$tmp/ctx/seqd"; else "$root/scripts/build.sh" "$tmp/ctx/seqd"; fi
file "$tmp/ctx/seqd" 2>/dev/null | grep -q "statically linked" || ldd "$tmp/ctx/seqd" 2>&1 | grep -q "not a dynamic executable" \
  || { echo "seqd is not statically linked"; exit 1; }
podman build -q --format docker -f "$root/deploy/container/Containerfile" -t "$image" "$tmp/ctx"

echo "== the image's configuration"
check() { # check WHAT GOT WANT
  if [ "$2" != "$3" ]; then echo "image $1: $2, want $3"; exit 1; fi
  echo "  $1: $2"
}
check entrypoint "$(podman image inspect -f '{{json .Config.Entrypoint}}' "$image")" '["/usr/local/bin/seqd"]'
check cmd "$(podman image inspect -f '{{json .Config.Cmd}}' "$image")" '["serve"]'
check user "$(podman image inspect -f '{{.Config.User}}' "$image")" '65532:65532'
check ports "$(podman image inspect -f '{{range $p, $_ := .Config.ExposedPorts}}{{$p}} {{end}}' "$image")" '7700/tcp 7701/tcp 7702/tcp 7702/udp 7703/tcp '
check volumes "$(podman image inspect -f '{{range $v, $_ := .Config.Volumes}}{{$v}} {{end}}' "$image")" '/data '
check healthcheck "$(podman image inspect -f '{{json .Config.Healthcheck.Test}}' "$image")" \
  '["CMD","/usr/local/bin/seqd","health"]'

echo "== a 3-node cluster of it (host network)"
api() { echo "127.0.0.1:$((port + 10 * ($1 - 1)))"; }
join="127.0.0.1:$((port + 2)),127.0.0.1:$((port + 12)),127.0.0.1:$((port + 22))"
addrs="$(api 1),$(api 2),$(api 3)"
for i in 1 2 3; do
  p=$((port + 10 * (i - 1)))
  # The addresses as the image's SEQD_* variables: its health check asks
  # the API address SEQD_API_ADDR names.
  podman run -d --name "seqd-ci-n$i" --network host -v "seqd-ci-n$i:/data" \
    -e "SEQD_API_ADDR=127.0.0.1:$p" -e "SEQD_RAFT_ADDR=127.0.0.1:$((p + 1))" -e "SEQD_GOSSIP_ADDR=127.0.0.1:$((p + 2))" \
    -e "SEQD_REDIS_ADDR=127.0.0.1:$((p + 3))" \
    "$image" serve --id "n$i" --join "$join" --bootstrap-expect 3 >/dev/null
done
seqd="$tmp/ctx/seqd"
for _ in $(seq 150); do
  "$seqd" health --addr "$(api 1)" >/dev/null 2>&1 && "$seqd" health --addr "$(api 2)" >/dev/null 2>&1 \
    && "$seqd" health --addr "$(api 3)" >/dev/null 2>&1 && break
  sleep 0.2
done
"$seqd" status --addr "$addrs" || { cleanup_logs; exit 1; }

echo "== calls: Next through the Go client, gRPC health, the image's health check, the status page"
vals=$("$seqd" next --addr "$addrs" 42 42 7 | tr '\n' ' ')
[ "$vals" = "1 2 1 " ] || { echo "next: '$vals', want '1 2 1 '"; cleanup_logs; exit 1; }
echo "  next 42 42 7: $vals"
for i in 1 2 3; do "$seqd" health --addr "$(api "$i")" >/dev/null || { echo "n$i not SERVING"; cleanup_logs; exit 1; }; done
echo "  gRPC health: SERVING on all three"
for n in "${names[@]}"; do podman healthcheck run "$n" >/dev/null || { echo "$n: the image's health check fails"; cleanup_logs; exit 1; }; done
echo "  the image's HEALTHCHECK (podman healthcheck run): healthy on all three"
page=$(curl -fsS "http://$(api 1)/ui/")
grep -q 'app.js' <<<"$page" || { echo "status page: $page"; exit 1; }
echo "  status page: served"
# The Redis protocol front end, spoken by hand (no redis-cli needed):
# INCR of key 42 of the default space goes after the two values above.
incr=$(printf 'INCR 42\r\n' | timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$((port + 3)); cat >&3; head -c 4 <&3" | tr -d '\r\n')
[ "$incr" = ":3" ] || { echo "INCR 42 on the Redis port: '$incr', want ':3'"; cleanup_logs; exit 1; }
echo "  the Redis protocol: INCR 42 = 3"

echo "== SIGTERM: a clean leave"
# (podman also says it has no systemd to remove the health check's timer.)
podman stop -t 30 seqd-ci-n1 >/dev/null 2>&1 || true
code=$(podman inspect -f '{{.State.ExitCode}}' seqd-ci-n1)
logs=$(podman logs seqd-ci-n1 2>&1)
grep -q 'msg="shutting down" signal=terminated' <<<"$logs" && grep -q 'msg=stopped' <<<"$logs" && [ "$code" = 0 ] \
  || { echo "n1 after SIGTERM: exit $code"; tail -20 <<<"$logs"; exit 1; }
echo "  n1: exit 0 after 'shutting down' and 'stopped'"
vals=$("$seqd" next --addr "$(api 2),$(api 3)" --timeout 20s 42)
[ "$vals" -gt 2 ] || { echo "next after n1 left: $vals"; exit 1; }
echo "  the other two serve: next 42 = $vals"
echo "container test: ok"
