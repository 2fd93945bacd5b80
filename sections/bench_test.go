package sections_test

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/sections"
)

// Allocator benchmarks. Compare runs with benchstat:
//
//	go test -run '^$' -bench . -count 6 ./sections | tee new.txt

var benchSpace = seqd.Space{Name: "b", Step: 10000, SectionSize: 100000}

// BenchmarkNextBatch64 is one Next call of 64 random keys out of a million (a
// coalesced request); ns/id is per key.
func BenchmarkNextBatch64(b *testing.B) {
	a := serving(b, newStore(b, benchSpace), sections.Options{})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, 64)
	for b.Loop() {
		for i := range keys {
			keys[i] = r.Uint64N(1000000)
		}
		if _, err := a.Next(ctx, "b", keys); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/id")
}

// BenchmarkNextParallelHotKey has every goroutine take values of one key.
func BenchmarkNextParallelHotKey(b *testing.B) {
	a := serving(b, newStore(b, benchSpace), sections.Options{})
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		keys := []uint64{42}
		for pb.Next() {
			if _, err := a.Next(ctx, "b", keys); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReserve1000 takes 1000 values of one key per call.
func BenchmarkReserve1000(b *testing.B) {
	a := serving(b, newStore(b, benchSpace), sections.Options{})
	ctx := context.Background()
	var k uint64
	for b.Loop() {
		k++
		if _, err := a.Reserve(ctx, "b", k%1000, 1000); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCurrent reads one key.
func BenchmarkCurrent(b *testing.B) {
	a := serving(b, newStore(b, benchSpace), sections.Options{})
	ctx := context.Background()
	keys := []uint64{42}
	next1(b, a, "b", 42)
	for b.Loop() {
		if _, err := a.Current(ctx, "b", keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextBounded is Next of random keys with MaxKeysPerSection set
// (evictions on the hot path).
func BenchmarkNextBounded(b *testing.B) {
	a := serving(b, newStore(b, benchSpace), sections.Options{MaxKeysPerSection: 10000})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	keys := []uint64{0}
	for b.Loop() {
		keys[0] = r.Uint64N(1000000)
		if _, err := a.Next(ctx, "b", keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRaftEntriesPerID counts raises (one raft entry each) while one
// section hands out values: the Store sees at most one entry per step values
// per section. It reports ids per entry and fails if there are more entries
// than ids/step + 1.
func BenchmarkRaftEntriesPerID(b *testing.B) {
	s := newStore(b, benchSpace)
	a := serving(b, s, sections.Options{})
	ctx := context.Background()
	keys := []uint64{7}
	before := a.Raises()
	for b.Loop() {
		if _, err := a.Next(ctx, "b", keys); err != nil {
			b.Fatal(err)
		}
	}
	entries := a.Raises() - before
	if limit := uint64(b.N)/benchSpace.Step + 2; entries > limit {
		b.Fatalf("%d raises for %d ids with step %d: more than ids/step + 2 = %d", entries, b.N, benchSpace.Step, limit)
	}
	if entries > 0 {
		b.ReportMetric(float64(b.N)/float64(entries), "ids/entry")
	}
}

// BenchmarkNextWithManyKeysHeld first touches 10 million keys (1 million with
// -short, or SEQD_BENCH_KEYS), reports the heap they take per key (B/key),
// then times Next of random keys among them.
func BenchmarkNextWithManyKeysHeld(b *testing.B) {
	n := uint64(10_000_000)
	if testing.Short() {
		n = 1_000_000
	}
	if v, err := strconv.ParseUint(os.Getenv("SEQD_BENCH_KEYS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	before := heapInUse()
	a := serving(b, newStore(b, benchSpace), sections.Options{})
	ctx := context.Background()
	keys := make([]uint64, 1000)
	for k := uint64(0); k < n; k += uint64(len(keys)) {
		for i := range keys {
			keys[i] = k + uint64(i)
		}
		if _, err := a.Next(ctx, "b", keys); err != nil {
			b.Fatal(err)
		}
	}
	held := heapInUse() - before
	if got := a.KeysHeld(); got != int64(n) {
		b.Fatalf("KeysHeld %d, want %d", got, n)
	}
	r := rand.New(rand.NewPCG(1, 2))
	one := []uint64{0}
	b.ResetTimer()
	for b.Loop() {
		one[0] = r.Uint64N(n)
		if _, err := a.Next(ctx, "b", one); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(held)/float64(n), "B/key")
	b.ReportMetric(float64(held)/(1<<20), "MiB-held")
	runtime.KeepAlive(a)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkNextColdSections200 is one Next of 200 keys, each in a section
// never loaded before (section size 1): the call's raises share one entry.
// It reports Store.Raise calls (raft entries) per call.
func BenchmarkNextColdSections200(b *testing.B) {
	a := serving(b, newStore(b, seqd.Space{Name: "c", Step: 10, SectionSize: 1}), sections.Options{})
	ctx := context.Background()
	keys := make([]uint64, 200)
	var k uint64
	before := a.Raises()
	for b.Loop() {
		for i := range keys {
			keys[i] = k
			k++
		}
		if _, err := a.Next(ctx, "c", keys); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(a.Raises()-before)/float64(b.N), "entries/op")
}
