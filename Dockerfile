# seqd: a static binary on a distroless, non-root base.
#
#   docker build -t seqd .
#
# The binary is the one `scripts/build.sh` makes (CGO_ENABLED=0 go build
# -trimpath -buildvcs=false -ldflags="-s -w -buildid="), which is reproducible:
# the same source and Go version give the same bytes.
#
# The runtime layout below the final FROM (binary path, /data owned by
# 65532, user, volume, environment, ports, health check, entrypoint) is the
# same as deploy/container/Containerfile's, the image CI builds and runs
# without pulling a base image; deploy/layout_test.go fails when they differ.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o /out/seqd ./cmd/seqd \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seqd /usr/local/bin/seqd
# Raft log, FSM and snapshots, owned by the user seqd runs as. Mount a volume
# here: a node must keep its data across restarts (a node that loses it has
# to be removed and re-added).
COPY --from=build --chown=65532:65532 /out/data /data
# 65532 is distroless's nonroot, numeric so that Kubernetes can check
# runAsNonRoot.
USER 65532:65532
VOLUME /data
ENV SEQD_DATA_DIR=/data \
    SEQD_API_ADDR=0.0.0.0:7700 \
    SEQD_RAFT_ADDR=0.0.0.0:7701 \
    SEQD_GOSSIP_ADDR=0.0.0.0:7702 \
    SEQD_REDIS_ADDR=0.0.0.0:7703
# 7703: the Redis protocol front end (docs/redis.md).
EXPOSE 7700 7701 7702 7702/udp 7703
# Healthy while the node can answer sequence calls (gRPC health, SERVING),
# asked at the address SEQD_API_ADDR (or --api-addr's value given as it)
# serves, on loopback.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/seqd", "health"]
ENTRYPOINT ["/usr/local/bin/seqd"]
CMD ["serve"]
