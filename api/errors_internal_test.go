package api

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/group"
)

// TestClassify: the layers' sentinel errors, wrapped as the layers wrap
// them, map to the code a caller can act on and keep their text; anything
// else is internal.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code connect.Code
	}{
		{fmt.Errorf("removing n4: %w", group.ErrConfigurationChanged), connect.CodeAborted},
		{fmt.Errorf("x: %w", seqd.ErrNotLeader), connect.CodeUnavailable},
		{seqd.ErrLeaseNotHeld, connect.CodeUnavailable},
		{fmt.Errorf("%w: %q", cluster.ErrUnknownServer, "n9"), connect.CodeNotFound},
		{cluster.ErrLastVoter, connect.CodeFailedPrecondition},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{seqd.ErrUnknownSpace, connect.CodeNotFound},
		{fmt.Errorf("disk on fire"), connect.CodeInternal},
	} {
		code, msg := classify(tc.err)
		if code != tc.code {
			t.Errorf("classify(%v) = %v, want %v", tc.err, code, tc.code)
		}
		if code != connect.CodeInternal && code != connect.CodeDeadlineExceeded && msg != tc.err.Error() {
			t.Errorf("classify(%v) says %q, want the error's text", tc.err, msg)
		}
	}
}
