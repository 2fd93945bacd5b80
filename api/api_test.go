package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	healthv1 "github.com/seqd/seqd/api/gen/grpc/health/v1"
	"github.com/seqd/seqd/api/gen/grpc/health/v1/healthv1connect"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
)

func codeOf(err error) connect.Code { return connect.CodeOf(err) }

func TestBadInputGetsTheRightCode(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	h := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + c.Nodes[0].APIAddr
	seq := seqv1connect.NewSequenceServiceClient(h, base)
	admin := seqv1connect.NewAdminServiceClient(h, base)
	ctx := context.Background()

	many := make([]uint64, 10001)
	cases := []struct {
		name string
		call func() error
		want connect.Code
	}{
		{"unknown space", func() error {
			_, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: "nope", Keys: []uint64{1}}))
			return err
		}, connect.CodeNotFound},
		{"empty keys", func() error {
			_, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: "default"}))
			return err
		}, connect.CodeInvalidArgument},
		{"too many keys", func() error {
			_, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: "default", Keys: many}))
			return err
		}, connect.CodeInvalidArgument},
		{"current empty keys", func() error {
			_, err := seq.Current(ctx, connect.NewRequest(&seqv1.CurrentRequest{Space: "default"}))
			return err
		}, connect.CodeInvalidArgument},
		{"current too many keys", func() error {
			_, err := seq.Current(ctx, connect.NewRequest(&seqv1.CurrentRequest{Space: "default", Keys: many}))
			return err
		}, connect.CodeInvalidArgument},
		{"reserve count 0", func() error {
			_, err := seq.Reserve(ctx, connect.NewRequest(&seqv1.ReserveRequest{Space: "default", Key: 1}))
			return err
		}, connect.CodeInvalidArgument},
		{"reserve count too large", func() error {
			_, err := seq.Reserve(ctx, connect.NewRequest(&seqv1.ReserveRequest{Space: "default", Key: 1, Count: 1000001}))
			return err
		}, connect.CodeInvalidArgument},
		{"malformed space name", func() error {
			_, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: "Bad Name!", Keys: []uint64{1}}))
			return err
		}, connect.CodeInvalidArgument},
		{"space name too long", func() error {
			_, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: strings.Repeat("a", 65), Keys: []uint64{1}}))
			return err
		}, connect.CodeInvalidArgument},
		{"create space without name", func() error {
			_, err := admin.CreateSpace(ctx, connect.NewRequest(&seqv1.CreateSpaceRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"create space with huge step", func() error {
			_, err := admin.CreateSpace(ctx, connect.NewRequest(&seqv1.CreateSpaceRequest{Name: "x", Step: 1 << 50}))
			return err
		}, connect.CodeInvalidArgument},
		{"create space conflicting", func() error {
			_, err := admin.CreateSpace(ctx, connect.NewRequest(&seqv1.CreateSpaceRequest{Name: "default", Step: 5}))
			return err
		}, connect.CodeAlreadyExists},
	}
	for _, tc := range cases {
		if got := codeOf(tc.call()); got != tc.want {
			t.Errorf("%s: code %v, want %v", tc.name, got, tc.want)
		}
	}

	// Malformed bodies over the Connect JSON protocol, as curl would send them.
	for _, body := range []string{`{`, `{"keys":"x"}`, `{"keys":[-1]}`, `[]`, `{"space":5}`} {
		resp, err := h.Post(base+seqv1connect.SequenceServiceNextProcedure, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Code string }
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Code != "invalid_argument" {
			t.Errorf("body %q: HTTP %d %s, want 400 invalid_argument", body, resp.StatusCode, b)
		}
	}
	// A garbage binary protobuf body.
	resp, err := h.Post(base+seqv1connect.SequenceServiceNextProcedure, "application/proto", bytes.NewReader([]byte{0xff, 0xff, 0xff}))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("garbage protobuf: HTTP %d, want 400", resp.StatusCode)
	}

	// The node still serves after all of that.
	r, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1, 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Msg.GetValues(); len(v) != 2 || v[0] != 1 || v[1] != 2 {
		t.Fatalf("values %v, want [1 2] (empty space means default)", v)
	}
}

// TestResourceExhaustedNearTheTop starts a node on an FSM whose default space
// is already near 2^63-1: values run up to it, then resource_exhausted, never
// a wrapped value.
func TestResourceExhaustedNearTheTop(t *testing.T) {
	// A section this high is reached only through a restore's margin (one
	// raise moves a section by at most fsm.MaxRaise): back up a cluster
	// whose section 0 was raised once, and restore it just below the top.
	old := testcluster.Start(t, 1, testcluster.Options{})
	old.WaitServingLeader(20 * time.Second)
	ocl, err := client.New(old.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ocl.Next(context.Background(), "default", 9); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	out, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ocl.Backup(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	out.Close()
	old.Close()
	sum, err := fsm.InspectBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.StartRestored(t, file, seqd.MaxValue-3-sum.HighestBefore, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)

	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.Reserve(ctx, "default", 9, 4); codeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("Reserve past the top: %v, want resource_exhausted", err)
	}
	var last uint64
	for range 3 {
		v, err := cl.Next(ctx, "default", 9)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= last {
			t.Fatalf("got %d after %d", v[0], last)
		}
		last = v[0]
	}
	if last != seqd.MaxValue {
		t.Fatalf("last value %d, want 2^63-1", last)
	}
	if _, err := cl.Next(ctx, "default", 9); codeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("Next past the top: %v, want resource_exhausted", err)
	}
}

// TestFollowersForwardAndAllProtocolsWork calls every node of a 3-node
// cluster over Connect, gRPC and gRPC-Web: followers forward to the leader,
// and the values of one key keep increasing across all of them.
func TestFollowersForwardAndAllProtocolsWork(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	ctx := context.Background()
	var last uint64
	for _, proto := range []client.Protocol{client.Connect, client.GRPC, client.GRPCWeb} {
		for _, addr := range c.APIAddrs() {
			// One address only, and no routing table (which would move the
			// client to the leader): the node answers, forwarding if it must.
			cl, err := client.New([]string{addr}, client.Options{Protocol: proto, DisableRouting: true})
			if err != nil {
				t.Fatal(err)
			}
			v, err := cl.Next(ctx, "default", 77)
			if err != nil {
				t.Fatalf("%s via %s: %v", proto, addr, err)
			}
			if v[0] <= last {
				t.Fatalf("%s via %s: got %d after %d", proto, addr, v[0], last)
			}
			last = v[0]
			cur, err := cl.Current(ctx, "default", 77)
			if err != nil || cur[0] != last {
				t.Fatalf("%s via %s: Current = %v, %v; want %d", proto, addr, cur, err, last)
			}
			if cl.Leader() != addr {
				t.Fatalf("client switched away from %s to %s though the node forwarded", addr, cl.Leader())
			}
		}
	}
	// Spaces created through a follower are listed by every node.
	follower := c.Nodes[0]
	if c.ServingLeader() == follower {
		follower = c.Nodes[1]
	}
	cl, _ := client.New([]string{follower.APIAddr}, client.Options{})
	if r, err := cl.CreateSpace(ctx, "orders", 100, 1000); err != nil || !r.GetCreated() {
		t.Fatalf("CreateSpace via follower: %v %v", r, err)
	}
	if r, err := cl.CreateSpace(ctx, "orders", 100, 1000); err != nil || r.GetCreated() {
		t.Fatalf("CreateSpace again: %v %v, want created=false", r, err)
	}
	for _, addr := range c.APIAddrs() {
		cl, _ := client.New([]string{addr}, client.Options{})
		spaces, err := cl.ListSpaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(spaces) != 2 || spaces[0].GetName() != "default" || spaces[1].GetName() != "orders" {
			t.Fatalf("ListSpaces via %s: %v", addr, spaces)
		}
	}
	// ClusterStatus from any node names the same leader and all three nodes.
	leader := c.WaitServingLeader(20 * time.Second)
	for _, addr := range c.APIAddrs() {
		cl, _ := client.New([]string{addr}, client.Options{})
		st, err := cl.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetLeaderId() != leader.ID || len(st.GetNodes()) != 3 || st.GetTerm() == 0 {
			t.Fatalf("ClusterStatus via %s: %v", addr, st)
		}
		states := map[string]int{}
		for _, n := range st.GetNodes() {
			states[n.GetRaftState()]++
			if !n.GetVoter() {
				t.Fatalf("node %s not a voter: %v", n.GetId(), st)
			}
		}
		if states["leader"] != 1 || states["follower"] != 2 {
			t.Fatalf("ClusterStatus via %s: states %v", addr, states)
		}
	}
}

// TestUnavailableCarriesLeaderHint: a forwarded call that reaches a follower
// is refused with unavailable and the leader's address.
func TestUnavailableCarriesLeaderHint(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	var follower *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			follower = m
		}
	}
	seq := seqv1connect.NewSequenceServiceClient(http.DefaultClient, "http://"+follower.APIAddr)
	req := connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}})
	req.Header().Set("Seqd-Forwarded", "test")
	_, err := seq.Next(context.Background(), req)
	if codeOf(err) != connect.CodeUnavailable {
		t.Fatalf("got %v, want unavailable", err)
	}
	var ce *connect.Error
	if !errorsAs(err, &ce) || ce.Meta().Get("Seqd-Leader") != leader.APIAddr || ce.Meta().Get("Seqd-Leader-Id") != leader.ID {
		t.Fatalf("leader hint missing: %v meta=%v", err, ce.Meta())
	}
}

func errorsAs(err error, target **connect.Error) bool { return errors.As(err, target) }

// TestHealthFollowsLeadership: every node of a healthy cluster reports
// SERVING (followers forward); a node that has lost its quorum and knows no
// leader reports NOT_SERVING; unknown services are not_found.
func TestHealthFollowsLeadership(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	check := func(m *testcluster.Member, service string) (healthv1.HealthCheckResponse_ServingStatus, error) {
		hc := healthv1connect.NewHealthClient(http.DefaultClient, "http://"+m.APIAddr, connect.WithGRPC())
		r, err := hc.Check(context.Background(), connect.NewRequest(&healthv1.HealthCheckRequest{Service: service}))
		if err != nil {
			return 0, err
		}
		return r.Msg.GetStatus(), nil
	}
	for _, m := range c.Nodes {
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := check(m, "seq.v1.SequenceService")
			if err == nil && st == healthv1.HealthCheckResponse_SERVING {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v %v, want SERVING", m.ID, st, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := check(leader, "no.such.Service"); codeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown service: %v", err)
	}
	var survivor *testcluster.Member
	for _, m := range c.Nodes {
		if m == leader {
			continue
		}
		if survivor == nil {
			survivor = m
		} else {
			m.Kill()
		}
	}
	leader.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := check(survivor, "")
		if err == nil && st == healthv1.HealthCheckResponse_NOT_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("survivor without quorum: %v %v, want NOT_SERVING", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
