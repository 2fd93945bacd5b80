// Package flake is seqd's second id family: globally unique, roughly
// time-ordered 64-bit ids in the shape of Twitter's Snowflake,
//
//	id = T·2^(w+s) | W·2^s | S
//
// where T counts time units since a namespace's epoch, W is a worker and S a
// sequence within one unit. It holds the pure parts, what a user of ids
// needs: layouts (Layout, the presets and their validation), composing and
// decoding ids, a namespace's settings (Namespace, ValidateNamespace, the
// obfuscation settings) and its obfuscation (Obfuscator), the Grant of a
// worker's time range, and the Generator that issues ids from it. The
// machinery that holds workers (the Holder, its Granter and its Reference
// clock) is the subpackage flake/holder; flake/ff1 is the FF1 cipher.
//
// # Where uniqueness comes from
//
// Uniqueness never rests on a clock. A holder (flake/holder: a seqd node
// serving ids, or an embedded generator in a client) issues ids for worker W only from a time
// range (Lo, Hi] that the cluster granted it through the Raft log; the state
// machine keeps, per worker, the highest time ever granted (hwm) and grants a
// new range only from Lo ≥ hwm, so ranges of one worker never overlap. A
// Generator issues each id from inside its range, never above Hi, and its ids
// strictly increase; it is never persisted, so a restarted holder must
// acquire a new range. Two ids can then be equal only if one range were used
// by two generators, which the holder's contract rules out: a range belongs
// to one process incarnation and is never handed on.
//
// Clocks decide only where ids fall inside the range (how close T is to the
// real time of the call): a holder's Reference starts from the leader's time
// carried in the grant and advances on a clock that does not step, so a
// holder's wall clock stepping back or forward changes nothing, and a time
// that runs ahead of the reference is bounded by the Generator's lead.
//
// # What it never does
//
// It never imports raft, fsm/, group/, cluster/ or api/, never reads the wall
// clock itself (its callers pass times in), and never writes anything
// durable.
package flake
