package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/bootclock"
)

// DefaultMaxClockSkew is how far a leader's wall clock may be from its
// peers' before it refuses flake grants.
const DefaultMaxClockSkew = time.Second

// clockSampleTTL is how long a peer's clock sample counts.
const clockSampleTTL = 10 * time.Second

// ErrClockSkew means the leader's wall clock is too far from its peers' to
// stamp flake grants with it: the ids' times, and the namespaces' floors,
// would follow it (Unavailable: another leader, or a fixed clock, serves).
var ErrClockSkew = fmt.Errorf("%w: the leader's clock is too far from its peers'", seqd.ErrNotServing)

// clockSample is one reading of a peer's clock: the peer's time, taken as
// its time at the middle of the call, a reading of this server's boot-time
// clock at that moment, and the call's round trip, which bounds the
// reading's error. The peer's time now is predicted from the boot-time
// clock, which does not step, so a step of this server's own wall clock
// shows at once, not only at the next sample.
type clockSample struct {
	peerMs int64
	mono   time.Duration
	rtt    time.Duration
}

// clocks keeps the leader's latest sample of each voter's clock.
type clocks struct {
	running atomic.Bool
	mu      sync.Mutex
	samples map[string]clockSample
}

// startClockSample starts sampleClocks unless a sampling still runs: it
// may wait up to a second for a slow peer, and the host loop (loop.go) must not.
func (n *Node) startClockSample() {
	if !n.clocks.running.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.clocks.running.Store(false)
		n.sampleClocks()
	}()
}

// WallMs reads this server's wall clock in Unix ms (Config.WallClock).
func (n *Node) WallMs() int64 {
	if n.cfg.WallClock != nil {
		return n.cfg.WallClock()
	}
	return time.Now().UnixMilli()
}

// sampleClocks reads every other voter's clock, on the leader, in parallel
// and within a second.
func (n *Node) sampleClocks() {
	if n.cfg.Peers == nil || !n.authority().IsLeader() {
		return
	}
	cf := n.authority().Raft().GetConfiguration()
	if cf.Error() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range cf.Configuration().Servers {
		id := string(s.ID)
		if id == n.cfg.ID || s.Suffrage != raft.Voter {
			continue
		}
		m, ok := n.gossipMember(id)
		if !ok || !m.Alive || m.APIAddr == "" {
			continue
		}
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			start := bootclock.Now()
			peer, err := n.cfg.Peers.Clock(ctx, addr)
			end := bootclock.Now()
			if err != nil {
				return
			}
			n.clocks.mu.Lock()
			if n.clocks.samples == nil {
				n.clocks.samples = map[string]clockSample{}
			}
			n.clocks.samples[id] = clockSample{peerMs: peer, mono: start + (end-start)/2, rtt: end - start}
			n.clocks.mu.Unlock()
		}(id, m.APIAddr)
	}
	wg.Wait()
}

// gossipMember returns a member as gossip knows it.
func (n *Node) gossipMember(id string) (Member, bool) {
	if n.gossip == nil {
		return Member{}, false
	}
	return n.gossip.member(id)
}

// WallClockOK implements group.Host: this server's wall clock agrees,
// within MaxClockSkew (plus each reading's error), with the clocks of
// enough other voters that it and they form a majority of the voters. A
// lone voter has nothing to compare with and agrees. Samples older than
// 10 s do not count.
func (n *Node) WallClockOK() error {
	cf := n.authority().Raft().GetConfiguration()
	if cf.Error() != nil {
		return cf.Error()
	}
	voters := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	need := voters/2 + 1 - 1 // a majority, this server included
	if need <= 0 {
		return nil
	}
	bound := n.cfg.MaxClockSkew
	wall, mono := n.WallMs(), bootclock.Now()
	n.clocks.mu.Lock()
	defer n.clocks.mu.Unlock()
	agree, known := 0, 0
	var worst time.Duration
	for _, s := range cf.Configuration().Servers {
		smp, ok := n.clocks.samples[string(s.ID)]
		if !ok || s.Suffrage != raft.Voter || mono-smp.mono > clockSampleTTL {
			continue
		}
		known++
		off := time.Duration(wall-(smp.peerMs+(mono-smp.mono).Milliseconds())) * time.Millisecond
		if off < 0 {
			off = -off
		}
		if off <= bound+smp.rtt/2 {
			agree++
		} else if off > worst {
			worst = off
		}
	}
	if agree >= need {
		return nil
	}
	if known < need {
		return fmt.Errorf("%w: %d of the %d other voters' clocks read in the last %v", errClockUnknown, known, voters-1, clockSampleTTL)
	}
	return fmt.Errorf("%w: %v away from %d of %d voters (bound %v)", ErrClockSkew, worst, known-agree, voters-1, bound)
}

// errClockUnknown means the leader has not read enough peers' clocks yet.
var errClockUnknown = fmt.Errorf("%w: the leader has not read its peers' clocks yet", seqd.ErrNotServing)

// ClockSkew is, on the leader, the largest distance between its wall clock
// and a voter's, as last read (0 when it has read none).
func (n *Node) ClockSkew() time.Duration {
	wall, mono := n.WallMs(), bootclock.Now()
	n.clocks.mu.Lock()
	defer n.clocks.mu.Unlock()
	var worst time.Duration
	for _, smp := range n.clocks.samples {
		if mono-smp.mono > clockSampleTTL {
			continue
		}
		off := time.Duration(wall-(smp.peerMs+(mono-smp.mono).Milliseconds())) * time.Millisecond
		worst = max(worst, off, -off)
	}
	return worst
}
