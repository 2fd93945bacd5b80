package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
)

// backupNode is an AdminService whose Backup either refuses with
// unavailable and a leader hint, or streams chunks after a delay.
type backupNode struct {
	seqv1connect.UnimplementedAdminServiceHandler
	hint   string // when set, Backup answers unavailable naming this leader
	chunks []string
	delay  time.Duration
	calls  atomic.Int32
}

func (b *backupNode) Backup(ctx context.Context, _ *connect.Request[seqv1.BackupRequest], stream *connect.ServerStream[seqv1.BackupResponse]) error {
	b.calls.Add(1)
	if b.hint != "" {
		err := connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
		err.Meta().Set(seqd.HeaderLeader, b.hint)
		return err
	}
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, c := range b.chunks {
		if err := stream.Send(&seqv1.BackupResponse{Data: []byte(c)}); err != nil {
			return err
		}
	}
	return nil
}

func serveAdmin(t *testing.T, h seqv1connect.AdminServiceHandler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewAdminServiceHandler(h))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestBackupRetriesLikeEveryCall: a backup goes past a node that is down (a
// transport failure) and a follower's unavailable answer to the leader it
// names, as every call does, and a slow stream is not cut by
// AttemptTimeout.
func TestBackupRetriesLikeEveryCall(t *testing.T) {
	leader := &backupNode{chunks: []string{"bolt", "-", "file"}, delay: 300 * time.Millisecond}
	leaderAddr := serveAdmin(t, leader)
	follower := &backupNode{hint: leaderAddr}
	followerAddr := serveAdmin(t, follower)
	c, err := client.New([]string{deadAddr(t), followerAddr}, client.Options{
		DisableRouting: true, AttemptTimeout: 50 * time.Millisecond, RetryFor: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := c.Backup(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "bolt-file" || n != int64(out.Len()) {
		t.Fatalf("backup wrote %d bytes %q, want 9 bytes %q", n, out.String(), "bolt-file")
	}
	if f, l := follower.calls.Load(), leader.calls.Load(); f != 1 || l != 1 {
		t.Fatalf("follower asked %d times, leader %d; want once each", f, l)
	}
}

// TestBackupGivesUpAfterRetryFor: a cluster that only answers unavailable
// fails the backup with unavailable once RetryFor has passed, and writes
// nothing.
func TestBackupGivesUpAfterRetryFor(t *testing.T) {
	n := &backupNode{}
	addr := serveAdmin(t, n)
	n.hint = addr // a node that names itself: no leader to go to
	c, err := client.New([]string{addr}, client.Options{DisableRouting: true, RetryFor: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	if _, err := c.Backup(context.Background(), &out); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("backup of an unavailable cluster: %v, want unavailable", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Fatalf("gave up after %v, want about RetryFor (300ms)", took)
	}
	if out.Len() != 0 || n.calls.Load() < 2 {
		t.Fatalf("wrote %d bytes after %d attempts; want nothing, after retries", out.Len(), n.calls.Load())
	}
}
