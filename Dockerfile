# seqd: a static binary on a distroless, non-root base.
#
#   docker build -t seqd .
#
# The binary is the one `scripts/build.sh` makes (CGO_ENABLED=0 go build
# -trimpath -buildvcs=false -ldflags="-s -w -buildid="), which is reproducible:
# the same source and Go version give the same bytes.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o /out/seqd ./cmd/seqd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seqd /usr/local/bin/seqd
USER nonroot:nonroot
# Raft log, FSM and snapshots. Mount a volume here: a node must keep its data
# across restarts (a node that loses it has to be removed and re-added).
VOLUME /data
ENV SEQD_DATA_DIR=/data \
    SEQD_API_ADDR=0.0.0.0:7700 \
    SEQD_RAFT_ADDR=0.0.0.0:7701 \
    SEQD_GOSSIP_ADDR=0.0.0.0:7702 \
    SEQD_REDIS_ADDR=0.0.0.0:7703
# 7703: the Redis protocol front end (docs/redis.md).
EXPOSE 7700 7701 7702 7702/udp 7703
# Healthy while the node can answer sequence calls (gRPC health, SERVING).
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/seqd", "health", "--addr", "127.0.0.1:7700"]
ENTRYPOINT ["/usr/local/bin/seqd"]
CMD ["serve"]
