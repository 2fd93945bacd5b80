package main_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/cluster/traffic"
	"github.com/seqd/seqd/internal/proctest"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestNoGroupIsHandedToAServerThatDoesNotFollowTheTraffic: in a cluster of
// two servers of this build and one of the previous release, which marks
// no call as traffic to follow (Seqd-Entry) and hands a group it leads off
// its spread position back there, calls that enter at the older server
// (over the traffic floor, keys of every group, forwarded by it) move no
// group's leadership: were its forwards counted, a server of this build
// would hand it a group, and it would hand it back, over and over.
func TestNoGroupIsHandedToAServerThatDoesNotFollowTheTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and runs processes")
	}
	prev := buildPrevious(t, lastBuildOfProtocol5)
	ps := proctest.New(t, 3, "--lease", "500ms")
	ps[2].Bin = prev
	for _, p := range ps {
		p.Start(t)
	}
	before := waitGroupsBalanced(t, ps[0], 3, 60*time.Second)

	old := seqv1connect.NewSequenceServiceClient(http.DefaultClient, "http://"+ps[2].API)
	// Sixteen keys of each group in every call: the groups' values come at
	// sixteen times the calls' rate.
	const perGroup = 16
	keys := testcluster.KeysOfEachGroup(3, perGroup)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				cctx, cc := context.WithTimeout(ctx, 2*time.Second)
				_, err := old.Next(cctx, connect.NewRequest(&seqv1.NextRequest{Keys: keys}))
				cc()
				if err == nil {
					calls.Add(1)
				}
			}
		})
	}
	start := time.Now()
	time.Sleep(2*traffic.Window + time.Second) // a negative: no condition to wait for
	cancel()
	wg.Wait()
	rate := perGroup * float64(calls.Load()) / time.Since(start).Seconds()
	if rate < traffic.Floor {
		t.Fatalf("%.0f values of each group a second entered at the older server: too few for the check to prove anything", rate)
	}
	for _, p := range ps[:2] {
		for _, line := range strings.Split(p.LogText(), "\n") {
			if strings.Contains(line, "its traffic enters there") {
				t.Errorf("%s moved a group for its traffic to a server of the previous release: %s", p.ID, line)
			}
		}
	}
	after := routes(ps[0])
	for i, g := range before {
		if i >= len(after) || after[i].GetLeaderId() != g.GetLeaderId() {
			t.Errorf("group %d: led by %s before the calls, by %v after", i, g.GetLeaderId(), after)
		}
	}
	t.Logf("%.0f values/s of each group entered at %s (previous release); no group moved", rate, ps[2].ID)
}
