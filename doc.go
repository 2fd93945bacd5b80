// Package seqd is the vocabulary every other package of seqd shares: a
// space and its settings, a high-water mark, the default space, the limits
// of one call, the header names of the wire protocol, and the sentinel
// errors that clients see (each mapped to one Connect code in api/).
//
// It imports only the standard library, so that the allocator (sections/),
// the state machine (fsm/), the server and the Go client can all use it
// without depending on each other. It defines words, never behaviour beyond
// validating them.
package seqd
