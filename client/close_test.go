package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestCloseEndsStreamsAndCalls: a client whose coalesced Nexts go on a
// NextStream is closed while 8 callers call: every call answers either
// values (each key's strictly above its last) or ErrClosed (code
// canceled), nothing else, and a call begun after Close returned
// ErrClosed; the stream is closed, every call afterwards fails with
// ErrClosed at once, and Close again is nil.
func TestCloseEndsStreamsAndCalls(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			key, last := uint64(w), uint64(0)
			for i := 0; i < 100_000; i++ {
				after := false // the call begins after Close returned
				select {
				case <-stop:
					after = true
				default:
				}
				v, err := cl.Next(ctx, "", key)
				switch {
				case errors.Is(err, client.ErrClosed) && connect.CodeOf(err) == connect.CodeCanceled:
					return
				case err != nil:
					errs <- err
					return
				case after:
					errs <- errors.New("a call begun after Close returned values")
					return
				case v[0] <= last:
					errs <- errors.New("a value not above its key's last")
					return
				}
				last = v[0]
			}
			errs <- errors.New("100,000 calls and no ErrClosed")
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for cl.BatchStats().Streamed < 100 || cl.OpenStreams() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no stream in use within 20 s: %+v", cl.BatchStats())
		}
		time.Sleep(time.Millisecond)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := cl.OpenStreams(); n != 0 {
		t.Errorf("%d streams open after Close", n)
	}
	began := time.Now()
	if _, err := cl.Next(ctx, "", 1); !errors.Is(err, client.ErrClosed) || time.Since(began) > time.Second {
		t.Errorf("Next after Close: %v after %v, want ErrClosed at once", err, time.Since(began))
	}
	if _, err := cl.ClusterStatus(ctx); !errors.Is(err, client.ErrClosed) {
		t.Errorf("ClusterStatus after Close: %v, want ErrClosed", err)
	}
	if err := cl.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
}
