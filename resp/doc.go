// Package resp serves a small, strict subset of the Redis protocol (RESP2
// and RESP3) on a port of its own, so that a stock Redis client (redis-cli,
// redis-py, go-redis, rueidis, Jedis, ...) takes sequence values from seqd:
//
//	INCR key          Next: the new value (an integer)
//	INCRBY key n      Reserve(n), n in 1..1,000,000: the range's last value
//	GET key           Current, as a bulk string ("0" for a key never issued)
//	MGET key [key..]  Current of every key
//
// and what stock clients send to connect and look around: PING, ECHO,
// HELLO 2|3 (with AUTH and SETNAME), AUTH, CLIENT SETNAME / GETNAME /
// SETINFO / ID / TRACKING, SELECT 0, COMMAND, INFO, QUIT. A key is
// "[space:]key": everything before the last ':' is the space (mapped with
// seqd.ForeignName, so "Orders:1" is key 1 of space "orders..0"), the rest
// a decimal uint64; without a ':' the space is "default". Every other
// command is refused with an error that lists what is supported.
//
// What resp owns, one concept a file:
//
//   - server.go: the Server (a listener served by github.com/tidwall/redcon,
//     which parses and writes RESP), its Config and limits, connection state
//     and authentication.
//   - limits.go: the listener wrapper that bounds the bytes of one command
//     and how long a client may leave its replies unread.
//   - exec.go: one pipelined read of a connection, executed in order, with
//     consecutive INCRs (and GET/MGETs) handed to the Backend together.
//   - commands.go: the connection and introspection commands (HELLO, CLIENT,
//     COMMAND, INFO, ...), and key syntax.
//   - errors.go: Connect codes to Redis error replies (TRYAGAIN for
//     unavailable).
//
// What resp never does: route, coalesce or retry a call. The Backend does
// that (api.Sequences: the serving path of every Connect call, coalesced
// per space and group); resp only speaks the protocol and keeps each
// connection's replies in the order of its commands.
package resp
