package testcluster

import (
	"context"
	"errors"
	"time"

	"github.com/seqd/seqd"
)

// CreateSpace creates s through group 0's serving leader, retrying while
// leadership moves (a test cluster with lease handoff spreads leaders and may
// move group 0's between finding its leader and asking it). Creating the same
// space again is a no-op, so a retry after a commit whose answer was lost is
// safe.
func (c *Cluster) CreateSpace(s seqd.Space) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := errNoServingLeader
		if m := c.ServingLeader(); m != nil {
			if n := m.Node(); n != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err = n.CreateSpace(ctx, s)
				cancel()
			}
		}
		switch {
		case err == nil:
			return
		case time.Now().After(deadline):
			c.t.Fatalf("create space %q: %v", s.Name, err)
		case !retryable(err):
			c.t.Fatalf("create space %q: %v", s.Name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errNoServingLeader = errors.New("no serving leader of group 0")

// retryable reports whether err says only that the server asked no longer
// leads or serves group 0 (or did not answer in time).
func retryable(err error) bool {
	return errors.Is(err, errNoServingLeader) || errors.Is(err, seqd.ErrNotLeader) ||
		errors.Is(err, seqd.ErrNotServing) || errors.Is(err, context.DeadlineExceeded)
}
