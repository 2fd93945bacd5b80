package sections_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/sections"
)

// KeysHeld counts exactly the keys held in the current epoch's sections,
// even when calls that passed the lease check before a Revoke still update
// sections that the Revoke dropped; it is never negative.
func TestKeysHeldExactAcrossRevokes(t *testing.T) {
	s := newStore(t, seqd.Space{Name: "k", Step: 1000, SectionSize: 1 << 20})
	a := serving(t, s, sections.Options{MaxKeysPerSection: 16})
	ctx := context.Background()
	var fresh atomic.Uint64
	var lowest atomic.Int64 // the lowest KeysHeld seen
	low := func() {
		n := a.KeysHeld()
		for {
			l := lowest.Load()
			if n >= l || lowest.CompareAndSwap(l, n) {
				return
			}
		}
	}
	for round := range 20 {
		var stop atomic.Bool
		var took atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					k := fresh.Add(1) % (4 << 20) // fresh keys in four sections
					if _, err := a.Next(ctx, "k", []uint64{k}); err == nil {
						took.Add(1)
					} else if !errors.Is(err, seqd.ErrNotServing) {
						failed.Store(&err)
						return
					}
					low()
				}
			}()
		}
		// Revoke and grant while the callers run, each time once they have
		// taken some values in the new epoch.
		for range 20 {
			from := took.Load()
			for took.Load() < from+20 && failed.Load() == nil {
				runtime.Gosched()
			}
			a.Grant(a.Revoke(), a.Now()+time.Hour)
			low()
		}
		stop.Store(true)
		wg.Wait()
		if p := failed.Load(); p != nil {
			t.Fatalf("round %d: Next: %v", round, *p)
		}
		if l := lowest.Load(); l < 0 {
			t.Fatalf("round %d: KeysHeld was %d", round, l)
		}
		if got, want := a.KeysHeld(), a.KeysInSections(); got != want {
			t.Fatalf("round %d: KeysHeld %d, but the current sections hold %d keys", round, got, want)
		}
	}
}
