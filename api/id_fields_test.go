package api_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/sony/sonyflake"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestShardAndClusterFields: an instagram namespace issues ids with the
// caller's shard, through NextIds (ids and runs), the Go client's
// embedded generator and Decode; a shard that does not fit is refused; a
// namespace with a cluster field carries its value in every id and its
// layout; GetLayout says "fields" so that older clients refuse it; and the
// sonyflake preset's ids decompose with sonyflake's own Decompose.
func TestShardAndClusterFields(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	addr := c.Nodes[0].APIAddr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nextIDs(t, idClient(addr), "", 1) // on the flake protocol
	admin := adminClient(addr)
	for _, req := range []*seqv1.CreateNamespaceRequest{
		{Name: "photos", Layout: "instagram"},
		{Name: "sony", Layout: "sonyflake"},
		{Name: "dc", TimeBits: 41, ClusterBits: 3, Cluster: 5, WorkerBits: 7, SequenceBits: 12},
	} {
		if _, err := admin.CreateNamespace(ctx, connect.NewRequest(req)); err != nil {
			t.Fatalf("create %s: %v", req.Name, err)
		}
	}
	l, err := idClient(addr).GetLayout(ctx, connect.NewRequest(&seqv1.GetLayoutRequest{Namespace: "photos"}))
	if err != nil || l.Msg.GetShardBits() != 13 || l.Msg.GetObfuscation() != "fields" || l.Msg.GetTimeBits() != 40 || l.Msg.GetWorkerBits() != 5 {
		t.Fatalf("GetLayout(photos) = %v, %v", l, err)
	}
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	check := func(how string, ids []int64, shard uint64) {
		t.Helper()
		for i, id := range ids {
			if seen[id] || (i > 0 && id <= ids[i-1]) {
				t.Fatalf("%s: id %d repeated or not increasing", how, id)
			}
			seen[id] = true
		}
		d, err := cl.Decode(ctx, "photos", ids[len(ids)-1])
		if err != nil || d.GetShard() != shard || time.Since(time.UnixMilli(d.GetUnixMs())) > time.Minute {
			t.Fatalf("%s: Decode = %v, %v; want shard %d, now", how, d, err, shard)
		}
	}
	for _, shard := range []uint64{0, 77, 8191} {
		for _, a := range c.APIAddrs() {
			one, _ := client.New([]string{a}, client.Options{DisableRouting: true})
			ids, err := one.NextShardIds(ctx, "photos", 500, shard)
			if err != nil {
				t.Fatal(err)
			}
			check("NextIds via "+a, ids, shard)
		}
		g := cl.NewGenerator("photos", client.GeneratorOptions{})
		ids, err := g.NextShardN(ctx, 300, shard)
		if err != nil {
			t.Fatal(err)
		}
		check("an embedded generator", ids, shard)
		if _, err := g.NextShard(ctx, 8192); err == nil {
			t.Fatal("an embedded generator issued shard 8192 of a 13-bit field")
		}
		_ = g.Close(ctx)
	}
	if _, err := cl.NextShardIds(ctx, "photos", 1, 8192); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("shard 8192 of 13 bits: %v, want invalid_argument", err)
	}
	if _, err := cl.NextShardIds(ctx, "", 1, 1); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a shard of a layout without a shard field: %v, want invalid_argument", err)
	}

	dc, err := cl.NextIds(ctx, "dc", 10)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := cl.Decode(ctx, "dc", dc[0]); err != nil || d.GetCluster() != 5 {
		t.Fatalf("Decode of a cluster-5 id: %v, %v", d, err)
	}
	for _, bad := range []*seqv1.CreateNamespaceRequest{
		{Name: "big", TimeBits: 41, ClusterBits: 3, Cluster: 8, WorkerBits: 7, SequenceBits: 12}, // 8 does not fit 3 bits
		{Name: "secret", Layout: "instagram", Obfuscation: "ff1"},
		{Name: "preset", Layout: "snowflake", ShardBits: 4},
	} {
		if _, err := admin.CreateNamespace(ctx, connect.NewRequest(bad)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("create %v: %v, want invalid_argument", bad, err)
		}
	}

	sony, err := cl.NextIds(ctx, "sony", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range sony {
		d, err := cl.Decode(ctx, "sony", id)
		if err != nil {
			t.Fatal(err)
		}
		sf := sonyflake.Decompose(uint64(id))
		if uint64(d.GetWorker()) != sf["machine-id"] || uint64(d.GetSequence()) != sf["sequence"] ||
			d.GetUnixMs() != time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC).UnixMilli()+int64(sf["time"])*10 {
			t.Fatalf("id %d: seqd decodes %v, sonyflake %v", id, d, sf)
		}
	}
}

// TestDeleteNamespaceKeepsItsMarks: a deleted namespace is not_found on
// every server and listed nowhere; created again with its layout, it issues
// ids above every id it issued before; with another layout it is refused.
func TestDeleteNamespaceKeepsItsMarks(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nextIDs(t, idClient(c.Nodes[0].APIAddr), "", 1)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	var high int64
	for _, a := range c.APIAddrs() {
		ids := nextIDs(t, idClient(a), "orders", 100)
		high = max(high, ids[len(ids)-1])
	}
	if err := cl.DeleteNamespace(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	for _, a := range c.APIAddrs() {
		_, err := idClient(a).NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: "orders", Count: 1}))
		// The call returns once the leader applied the deletion. A follower
		// a heartbeat behind has not: it still issues from its holder's
		// range (its grant is fenced, its lease not over), or is unavailable.
		for (err == nil || connect.CodeOf(err) == connect.CodeUnavailable) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			_, err = idClient(a).NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: "orders", Count: 1}))
		}
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("NextIds of a deleted namespace via %s: %v, want not_found", a, err)
		}
	}
	nss, err := cl.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		if ns.GetName() == "orders" {
			t.Fatal("a deleted namespace is listed")
		}
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "orders", Layout: "js"}); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("creating it again with another layout: %v, want already_exists", err)
	}
	if err := cl.DeleteNamespace(ctx, "nope"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("deleting an unknown namespace: %v", err)
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	for _, a := range c.APIAddrs() {
		if ids := nextIDs(t, idClient(a), "orders", 100); ids[0] <= high {
			t.Fatalf("via %s, created again: id %d, not above %d issued before the delete", a, ids[0], high)
		}
	}
}
