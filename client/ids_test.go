package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/flake/holder"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestEmbeddedGenerators: generators in this process and the servers'
// NextIds never repeat an id; a generator holds its own worker, releases
// it on Close, and a new generator (a restarted process) starts above
// everything the released worker issued.
func TestEmbeddedGenerators(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The cluster moves to the flake protocol shortly after it forms.
	for {
		if _, err := cl.NextIds(ctx, "", 1); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var (
		mu   sync.Mutex
		seen = map[int64]string{}
	)
	record := func(who string, ids []int64) {
		mu.Lock()
		defer mu.Unlock()
		for i, id := range ids {
			if by, dup := seen[id]; dup {
				t.Errorf("id %d from %s was issued by %s too", id, who, by)
			}
			seen[id] = who
			if i > 0 && id <= ids[i-1] {
				t.Errorf("%s: ids of one call not increasing", who)
			}
		}
	}
	var wg sync.WaitGroup
	gens := []*client.Generator{cl.NewGenerator("", client.GeneratorOptions{Label: "g1"}), cl.NewGenerator("", client.GeneratorOptions{Label: "g2", Workers: 2})}
	for i, g := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 2000 {
				ids, err := g.NextN(ctx, 1+j%50)
				if err != nil {
					t.Errorf("generator %d: %v", i, err)
					return
				}
				record("generator", ids)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			ids, err := cl.NextIds(ctx, "", 20)
			if err != nil {
				t.Errorf("NextIds: %v", err)
				return
			}
			record("service", ids)
		}
	}()
	wg.Wait()
	ws, err := cl.ListWorkers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	for _, w := range ws {
		if w.GetHeld() {
			labels[w.GetLabel()] = true
		}
	}
	if !labels["g1"] || !labels["g2"] {
		t.Fatalf("held workers %v, want g1 and g2 among them", ws)
	}
	last, _ := gens[0].Next(ctx)
	l, _ := flake.Preset("snowflake")
	d, _ := l.Decode(last)
	if err := gens[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := gens[0].Next(ctx); !errors.Is(err, holder.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	again := cl.NewGenerator("", client.GeneratorOptions{Label: "g1-restarted"})
	defer again.Close(ctx)
	id, err := again.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nd, _ := l.Decode(id)
	if nd.Worker == d.Worker && id <= last {
		t.Fatalf("the released worker %d issued %d after %d", d.Worker, id, last)
	}
	// Concurrent NextIds calls are coalesced; each gets its own increasing
	// ids, none shared.
	before := cl.BatchStats()
	var cwg sync.WaitGroup
	for range 32 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for range 50 {
				ids, err := cl.NextIds(ctx, "", 5)
				if err != nil || len(ids) != 5 {
					t.Errorf("NextIds: %v, %d ids", err, len(ids))
					return
				}
				record("coalesced", ids)
			}
		}()
	}
	cwg.Wait()
	after := cl.BatchStats()
	if calls, reqs := after.Calls-before.Calls, after.Requests-before.Requests; calls != 32*50 || reqs >= calls {
		t.Fatalf("%d NextIds calls went as %d requests: not coalesced", calls, reqs)
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "js", Layout: "js"}); err != nil {
		t.Fatal(err)
	}
	js := cl.NewGenerator("js", client.GeneratorOptions{})
	defer js.Close(ctx)
	ids, err := js.NextN(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if ids[99] >= 1<<53 {
		t.Fatalf("a js id above 2^53: %d", ids[99])
	}
}
