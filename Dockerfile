# seqd: a static binary on a distroless, non-root base.
# Build: docker build -t seqd .   (the same binary: CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" ./cmd/seqd)
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/seqd ./cmd/seqd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seqd /usr/local/bin/seqd
USER nonroot:nonroot
VOLUME /data
ENV SEQD_DATA_DIR=/data
EXPOSE 7700 7701 7702 7702/udp
ENTRYPOINT ["/usr/local/bin/seqd"]
CMD ["serve", "--api-addr", "0.0.0.0:7700", "--raft-addr", "0.0.0.0:7701", "--gossip-addr", "0.0.0.0:7702"]
