package client

import "time"

// Test hooks (compiled into the package's tests only).

// ForwardedAnswers returns how many SequenceService answers came forwarded
// by the node asked (they carried Seqd-Leader).
func (c *Client) ForwardedAnswers() uint64 { return c.forwarded.Load() }

// RetriedAttempts returns how many attempts were tried again after a
// failed (or timed-out) attempt.
func (c *Client) RetriedAttempts() uint64 { return c.retried.Load() }

// GroupLeaders returns the per-group table's leader addresses ("" where
// unknown) and terms, or nil without a table.
func (c *Client) GroupLeaders() ([]string, []uint64) {
	t := c.groups.Load()
	if t == nil {
		return nil, nil
	}
	addrs, terms := make([]string, t.n), make([]uint64, t.n)
	for i, l := range t.leaders {
		if l.n != nil {
			addrs[i] = l.n.addr
		}
		terms[i] = l.term
	}
	return addrs, terms
}

// SectionSize returns the section size the per-group table holds for space
// (0: unknown, or no table).
func (c *Client) SectionSize(space string) uint64 {
	if t := c.groups.Load(); t != nil {
		_, size, _ := t.space(space)
		return size
	}
	return 0
}

// MeetGeneration has the client meet the generation v (a Seqd-Generation
// value), as it does in an answer that handed out values.
func (c *Client) MeetGeneration(v string) error { return c.gens.see(v, true) }

// SetSegmentClock makes a segment read time from clock (its sizing rule
// and its rate), for tests of the sizing rule.
func SetSegmentClock(s *Segment, clock func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = clock
	s.rate.reset(clock(), s.issued.Load())
}

// OpenStreams returns how many nodes have a NextStream open.
func (c *Client) OpenStreams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	open := 0
	for _, n := range c.nodes {
		n.stream.mu.Lock()
		if n.stream.cur != nil {
			open++
		}
		n.stream.mu.Unlock()
	}
	return open
}
