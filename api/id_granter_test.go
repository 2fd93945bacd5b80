package api_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestOwnGranter: a server's own holders get grants from group 0's leader
// without going through a Connect handler of their own server. On the
// leader the grant is decided in process: a fenced renewal answers
// seqd.ErrFenced as the state machine wrote it, with no Connect code (a
// call through this server's own handler would have been turned into
// failed_precondition and back). On a follower the holder asks the leader
// over the network: the same renewal answers seqd.ErrFenced read back from
// the leader's failed_precondition. Both grants
// carry the namespace's layout and the server's lease, and the leader
// lists the follower's worker under its label.
func TestOwnGranter(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "own", Layout: "instagram"}); err != nil {
		t.Fatal(err)
	}
	want, _ := flake.Preset("instagram")
	var follower *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			follower = m
			break
		}
	}
	logger := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name     string
		m        *testcluster.Member
		holderID string
	}{
		{"leader", leader, "holder-on-leader"},
		{"follower", follower, "holder-on-follower"},
	} {
		g := api.GranterOf(api.New(tc.m.Node(), logger))
		// Under load a leader may lose its lease or its leadership during
		// a call: a holder retries what is unavailable, and so does this
		// test, until the minute is up.
		var gr flake.Grant
		retry(ctx, func() (err error) { gr, err = g.Acquire(ctx, "own", tc.holderID, "label-"+tc.name); return err })
		if gr.Layout != want || gr.LeaseMs != 10000 || gr.Hi <= gr.Lo || gr.Namespace != "own" {
			t.Fatalf("%s: grant %+v, want layout %v, lease 10 s and a range", tc.name, gr, want)
		}
		stale := gr
		stale.Token += 100
		var err error
		retry(ctx, func() error {
			leads := tc.m.Node().Group(0).IsLeader()
			if _, err = g.Renew(ctx, stale, tc.holderID); !errors.Is(err, seqd.ErrFenced) || leads != tc.m.Node().Group(0).IsLeader() {
				return errors.New("not yet") // unavailable, or the leadership moved during the call
			}
			// A Connect error's text starts with its code: an answer that
			// went through a Connect handler says failed_precondition.
			if coded := strings.Contains(err.Error(), connect.CodeFailedPrecondition.String()); coded == leads {
				t.Fatalf("%s (leading group 0: %v): a stale renewal answered %v", tc.name, leads, err)
			}
			return nil
		})
		if !errors.Is(err, seqd.ErrFenced) {
			t.Fatalf("%s: a stale renewal answered %v, want seqd.ErrFenced", tc.name, err)
		}
		var r flake.Grant
		retry(ctx, func() (err error) { r, err = g.Renew(ctx, gr, tc.holderID); return err })
		if r.Token != gr.Token || r.Hi < gr.Hi {
			t.Fatalf("%s: renewal %+v of %+v", tc.name, r, gr)
		}
	}
	ws, err := cl.ListWorkers(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"label-leader", "label-follower"} {
		if !slices.ContainsFunc(ws, func(w *seqv1.Worker) bool { return w.GetHeld() && w.GetLabel() == label }) {
			t.Fatalf("no held worker labelled %s among %v", label, ws)
		}
	}
}

// retry calls f until it succeeds or ctx is done.
func retry(ctx context.Context, f func() error) {
	for f() != nil && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}
