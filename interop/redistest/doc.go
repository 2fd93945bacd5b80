// Package redistest holds the tests of seqd's Redis protocol front end with
// stock Redis clients (go-redis, rueidis, redis-py) against real seqd
// processes. It is a package of its own so that its test binary does not
// link the grpc-go client of interop's main package (both register
// grpc.health.v1).
package redistest
