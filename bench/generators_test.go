package main

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// BenchmarkGenerators compares seqd's embedded flake generator, and a
// Segment of one key, with the in-process generators users would otherwise
// embed, on one goroutine (one
// core) unless the name says parallel. Every sub-benchmark reports ids/s.
//
// seqd's generator runs against a real one-node cluster in this process (it
// acquires its worker through Raft and renews it in the background); its
// ids come from memory, bounded by the layout's rate (4,096 per ms for the
// default layout) plus a lead of at most 1 s borrowed ahead of the clock,
// so a run of a few seconds can exceed the layout's rate by the lead
// (run with -benchtime 5s or more to see the sustained rate).
// bwmarrin/snowflake waits for the next millisecond after 4,096 ids, and
// sonyflake sleeps after 256 ids per 10 ms by design.
//
//	cd bench && go test -run '^$' -bench Generators -benchtime 5s
func BenchmarkGenerators(b *testing.B) {
	b.Run("seqd-embedded", func(b *testing.B) {
		g := embedded(b, 1)
		ctx := context.Background()
		increasing(b, func() (int64, error) { return g.Next(ctx) })
	})
	b.Run("seqd-embedded-2-workers-parallel", func(b *testing.B) {
		g := embedded(b, 2)
		ctx := context.Background()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		idsPerSec(b)
	})
	// A Segment (Leaf-segment mode) of one key with Leaf's defaults:
	// values from reserved ranges in memory, the next range reserved in
	// the background; its ranges double (up to 1,000,000) while they
	// last less than 15 minutes, so a run of seconds soon reserves the
	// largest.
	b.Run("seqd-segment", func(b *testing.B) {
		s := segment(b)
		ctx := context.Background()
		b.ResetTimer()
		var last uint64
		for range b.N {
			v, err := s.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if v <= last {
				b.Fatalf("value %d after %d", v, last)
			}
			last = v
		}
		idsPerSec(b)
	})
	b.Run("seqd-segment-64-goroutines", func(b *testing.B) {
		s := segment(b)
		ctx := context.Background()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		idsPerSec(b)
	})
	b.Run("bwmarrin-snowflake", func(b *testing.B) {
		n, err := snowflake.NewNode(1)
		if err != nil {
			b.Fatal(err)
		}
		increasing(b, func() (int64, error) { return n.Generate().Int64(), nil })
	})
	b.Run("sonyflake", func(b *testing.B) {
		sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
		if err != nil {
			b.Fatal(err)
		}
		increasing(b, func() (int64, error) {
			id, err := sf.NextID()
			return int64(id), err
		})
	})
}

// increasing times b.N calls of next, checks that the ids increase, and
// reports ids/s.
func increasing(b *testing.B, next func() (int64, error)) {
	b.ResetTimer()
	var last int64
	for range b.N {
		id, err := next()
		if err != nil {
			b.Fatal(err)
		}
		if id <= last {
			b.Fatalf("id %d after %d", id, last)
		}
		last = id
	}
	idsPerSec(b)
}

func idsPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// embedded returns a generator of a default-layout namespace on a fresh
// one-node cluster, with its first worker already acquired.
func embedded(b *testing.B, workers int) *client.Generator {
	b.Helper()
	c := testcluster.Start(b, 1, testcluster.Options{Lease: 2 * time.Second, Heartbeat: time.Second})
	c.WaitServingLeader(30 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "bench", Layout: "snowflake"}); err != nil {
		b.Fatal(err)
	}
	g := cl.NewGenerator("bench", client.GeneratorOptions{Workers: workers})
	b.Cleanup(func() { _ = g.Close(context.Background()) })
	if _, err := g.Next(ctx); err != nil {
		b.Fatal(err)
	}
	return g
}

// segment returns a segment of one key on a fresh one-node cluster, with
// its first range already reserved.
func segment(b *testing.B) *client.Segment {
	b.Helper()
	c := testcluster.Start(b, 1, testcluster.Options{Lease: 2 * time.Second, Heartbeat: time.Second})
	c.WaitServingLeader(30 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s := cl.Segment("default", 1, client.SegmentOptions{})
	b.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Next(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}
