package client

import (
	"errors"
	"slices"

	"connectrpc.com/connect"
)

// ErrClosed is the error of a call made on a closed Client (wrapped in a
// connect error of code canceled, as gRPC answers calls on a closed
// connection): errors.Is(err, ErrClosed) tells it.
var ErrClosed = errors.New("client: closed")

var errClosed = connect.NewError(connect.CodeCanceled, ErrClosed)

// Close ends the client: its NextStream connections to the nodes close,
// the idle connections of its HTTP client close (not those of an
// Options.HTTPClient, which the caller owns), and every call made from
// now on, or retried from now on, fails with ErrClosed. A call whose
// attempt is under way ends with that attempt's answer. Segments made from
// the client have their own Close. Close is safe to call more than once
// and concurrently with calls.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, n := range nodes {
		n.stream.shutdown()
	}
	if c.opts.HTTPClient == nil {
		c.http.CloseIdleConnections()
	}
	return nil
}

// shutdown closes the node's open stream, once the client is closed (no
// stream opens then: see open and dial): messages in flight on it go to
// the unary path, which answers ErrClosed.
func (s *streamSlot) shutdown() {
	s.mu.Lock()
	st := s.cur
	s.mu.Unlock()
	if st != nil {
		st.fail(errClosed)
	}
}
