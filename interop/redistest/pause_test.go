package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/internal/proctest"
)

// TestRueidisINCRUnderLeaderPauses attacks the forward stream with a slow
// leader rather than a dead one: 16 callers INCR 10 keys (so that keys of
// the same group collide on one forward stream) through rueidis clients
// of two servers, while a server leading some group is stopped (SIGSTOP)
// for 5 s, longer than every forward's deadline (frontRetryFor, 2 s), and
// then continued (SIGCONT), so that its late answers arrive on streams
// whose forwards have given up; a last round stops a leader gracefully
// (SIGTERM) mid-stream and restarts it. The whole history is checked (no
// value twice, a call that began after another ended gets a larger value:
// internal/history), and so is availability: while one server of three is
// stopped, calls whose front end is not that server succeed again once a
// new leader serves (counted in the last 2 s of each pause).
func TestRueidisINCRUnderLeaderPauses(t *testing.T) {
	if os.Getenv("SEQD_LONG_TESTS") == "" {
		t.Skip("one of the longer fault mixes: SEQD_LONG_TESTS=1 runs it (docs/chaos-testing.md)")
	}
	ps, addrs := redisCluster(t, 3)
	clients := make([]rueidis.Client, 2)
	for i := range clients {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addrs[i]}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	var keys []uint64
	for _, k := range keysPerGroup(3) {
		keys = append(keys, k, k+1, k+2)
	}
	keys = append(keys, keys[0]+3)
	rec := history.NewRecorder()
	ctx, stop := context.WithCancel(context.Background())
	var oks, fails atomic.Int64
	// okVia[i]: calls through front end i that succeeded.
	var okVia [2]atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				ci := w % len(clients) // pinned: a stopped front end holds only its own callers
				c := clients[ci]
				k := keys[rng.IntN(len(keys))]
				ks := strconv.FormatUint(k, 10)
				op := history.Op{Key: k, Client: fmt.Sprintf("w%d/n%d", w, ci+1)}
				cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				op.Start = rec.Now()
				v, err := c.Do(cctx, c.B().Incr().Key(ks).Build()).AsInt64()
				op.End = rec.Now()
				cancel()
				if failed(t, ctx, &fails, op, err) {
					continue
				}
				op.First, op.Last = uint64(v), uint64(v)
				oks.Add(1)
				okVia[ci].Add(1)
				rec.Add(op)
			}
		})
	}
	healthy := func(victim *proctest.Proc) []int {
		var hs []int
		for i := range clients {
			if ps[i] != victim {
				hs = append(hs, i)
			}
		}
		return hs
	}
	var starved []string
	for round := range 3 {
		time.Sleep(1500 * time.Millisecond)
		victim := leaderOfSomeGroup(t, ps, addrs)
		victim.Signal(syscall.SIGSTOP)
		t.Logf("round %d: stopped %s (%d ops so far)", round, victim.ID, oks.Load())
		time.Sleep(3 * time.Second)
		hs := healthy(victim)
		var before int64
		for _, i := range hs {
			before += okVia[i].Load()
		}
		time.Sleep(2 * time.Second)
		var after int64
		for _, i := range hs {
			after += okVia[i].Load()
		}
		victim.Signal(syscall.SIGCONT)
		t.Logf("round %d: continued %s; %d calls through the healthy front ends %v in the pause's last 2 s", round, victim.ID, after-before, hs)
		if len(hs) > 0 && after == before {
			starved = append(starved, fmt.Sprintf("round %d (%s stopped)", round, victim.ID))
		}
	}
	time.Sleep(1500 * time.Millisecond)
	victim := leaderOfSomeGroup(t, ps, addrs)
	victim.Signal(syscall.SIGTERM)
	t.Logf("SIGTERM to %s (%d ops so far)", victim.ID, oks.Load())
	select {
	case <-victim.Done():
	case <-time.After(15 * time.Second):
		victim.Kill9()
		t.Errorf("%s did not stop within 15 s of SIGTERM", victim.ID)
	}
	victim.Start(t)
	time.Sleep(3 * time.Second)
	stop()
	wg.Wait()
	for _, s := range starved {
		t.Errorf("no call through a healthy front end succeeded in the last 2 s of a 5 s pause: %s", s)
	}
	checkHistory(t, rec, oks.Load(), fails.Load())
}
