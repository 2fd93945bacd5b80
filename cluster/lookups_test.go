package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/fsm"
)

// TestALookupAnswersOnlyFromAQuestionAskedAfterIt: concurrent callers
// share questions, but a caller that arrives while a question is in flight
// is answered by the next one, never by the one that began before it: the
// answer would be older than what the caller knows happened (a create
// returned, a change it was asked to follow).
func TestALookupAnswersOnlyFromAQuestionAskedAfterIt(t *testing.T) {
	var ls lookups
	var asked atomic.Uint64
	started := make(chan uint64, 4)
	release := make(chan struct{}, 4)
	query := func(name string) (fsm.SpaceRecord, error) {
		n := asked.Add(1)
		started <- n
		<-release
		return fsm.SpaceRecord{Version: n}, nil // the n-th question answers version n
	}
	type answer struct {
		rec fsm.SpaceRecord
		err error
	}
	call := func() chan answer {
		ch := make(chan answer, 1)
		go func() {
			rec, err := ls.ask(context.Background(), "s", query)
			ch <- answer{rec, err}
		}()
		return ch
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
		}
	}
	waiting := func(callers int) func() bool { // callers wait for the next question
		return func() bool {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			return ls.next["s"] != nil && ls.next["s"].callers == callers
		}
	}

	first := call()
	if n := <-started; n != 1 {
		t.Fatalf("question %d started first", n)
	}
	second, third := call(), call() // arrive while question 1 is in flight
	wait("both later callers waiting for the next question", waiting(2))
	release <- struct{}{}
	if a := <-first; a.err != nil || a.rec.Version != 1 {
		t.Fatalf("the first caller: %+v, want question 1's answer", a)
	}
	if n := <-started; n != 2 {
		t.Fatalf("question %d started after question 1, want 2", n)
	}
	release <- struct{}{}
	for _, ch := range []chan answer{second, third} {
		if a := <-ch; a.err != nil || a.rec.Version != 2 {
			t.Fatalf("a caller that arrived during question 1: %+v, want question 2's answer", a)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("%d questions for three callers, want 2 (the two later callers share one)", n)
	}
	// Nothing in flight any more: the next caller starts a question.
	fourth := call()
	if n := <-started; n != 3 {
		t.Fatalf("question %d, want 3", n)
	}
	release <- struct{}{}
	if a := <-fourth; a.rec.Version != 3 {
		t.Fatalf("the fourth caller: %+v, want question 3's answer", a)
	}
	// A caller that gives up stops waiting; the question still serves the others.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { _, err := ls.ask(ctx, "s", query); gone <- err }()
	<-started
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a caller whose context ended got an answer")
	}
	release <- struct{}{}
	wait("the question to end", func() bool { ls.mu.Lock(); defer ls.mu.Unlock(); return ls.running["s"] == nil })
}
