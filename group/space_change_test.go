package group_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/group"
)

// A space deleted and created again while a call on it waits for a raise
// never hands out a value twice: the call that holds the deleted space's
// section, and the calls on the section loaded after the create, take
// disjoint values (DESIGN.md C1; sections.Allocator.SpaceChanged says a
// dropped section hands out only values at or below the committed mark that
// a reload starts above).
//
// The sequence, on one serving leader. Key 7 of space m (step 1000) holds
// 1 with the mark at 1001. The raiser is busy with another space's raise
// (held in OnRaise: the scheduler or a slow disk delays the raiser
// goroutine the same way). Reserve(7, 1000) takes 2..1001 and queues a
// raise ahead of need, to 2001; Reserve(7, 3000) (call A) needs 4001 and
// waits for that raise. The operator deletes m and creates it again (same
// settings; both committed, the raise still queued). Next(7) (call B) loads
// the section again at the committed mark, 1001, and queues a raise to
// 2002. The raiser goes on: both raises commit; B takes 1002; A's raise
// fell short, so A raised again, on the dropped section, and took
// 1002..4001: 1002 twice. A call on a dropped section now fails instead
// (as a call on a section of an ended lease does), which hands out
// nothing.
func TestSpaceDeletedAndCreatedDuringARaiseNeverRepeats(t *testing.T) {
	var holding atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let) // before the group's Close, which waits for the raiser
	g := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) {
		c.OnRaise = func(int, time.Duration, error) {
			if holding.CompareAndSwap(true, false) {
				entered <- struct{}{}
				<-release
			}
		}
	})
	ctx := context.Background()
	a := g.Allocator()
	m := seqd.Space{Name: "m", Step: 1000, SectionSize: 100}
	for _, sp := range []seqd.Space{m, {Name: "other", Step: 10, SectionSize: 10}} {
		if _, err := g.CreateSpace(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	const key = 7
	if v, err := a.Next(ctx, "m", []uint64{key}); err != nil || v[0] != 1 {
		t.Fatalf("first Next = %v, %v", v, err)
	}

	// Hold the raiser in another space's raise.
	holding.Store(true)
	otherDone := make(chan error, 1)
	go func() { _, err := a.Next(ctx, "other", []uint64{1}); otherDone <- err }()
	<-entered

	first, err := a.Reserve(ctx, "m", key, 1000) // 2..1001, a raise ahead queued
	if err != nil || first != 2 {
		t.Fatalf("Reserve(7, 1000) = %d, %v", first, err)
	}
	type result struct {
		first uint64
		err   error
	}
	callA := make(chan result, 1)
	go func() { v, err := a.Reserve(ctx, "m", key, 3000); callA <- result{v, err} }()
	waitParked(t, 2)

	if err := g.DeleteSpace(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if created, err := g.CreateSpace(ctx, m); err != nil || !created {
		t.Fatalf("CreateSpace after the delete: %v, %v", created, err)
	}
	callB := make(chan result, 1)
	go func() {
		v, err := a.Next(ctx, "m", []uint64{key})
		if err != nil {
			callB <- result{0, err}
			return
		}
		callB <- result{v[0], nil}
	}()
	waitParked(t, 3)
	let()
	if err := <-otherDone; err != nil {
		t.Fatal(err)
	}
	ra, rb := <-callA, <-callB
	if rb.err != nil {
		t.Fatalf("call B: %v", rb.err)
	}
	if ra.err != nil {
		// Failing is allowed (it hands out nothing); B serves above 1001.
		t.Logf("call A failed: %v; call B took %d", ra.err, rb.first)
		if rb.first <= 1001 {
			t.Fatalf("call B took %d, handed out before", rb.first)
		}
		return
	}
	t.Logf("call A took %d..%d, call B took %d", ra.first, ra.first+2999, rb.first)
	if rb.first >= ra.first && rb.first <= ra.first+2999 {
		t.Fatalf("value %d handed out twice: call B's Next, and call A's Reserve %d..%d on the deleted space's section", rb.first, ra.first, ra.first+2999)
	}
	if rb.first <= 1001 || ra.first <= 1001 {
		t.Fatalf("a value at or below 1001, handed out before: A from %d, B %d", ra.first, rb.first)
	}
}

// waitParked waits until n goroutines wait in the allocator for a raise
// (parked in sections.(*Allocator).take): the call that holds the raiser,
// then call A, then call B.
func waitParked(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := string(buf[:runtime.Stack(buf, true)])
		got := 0
		for _, gr := range strings.Split(st, "\n\n") {
			if strings.Contains(gr, " [select") && strings.Contains(gr, "sections.(*Allocator).take(") {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for a raise, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
