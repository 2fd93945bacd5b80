package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/proctest"
)

// fenceState asks p about itself: serving (group 0's lease) and fenced; ok
// is false when it does not answer.
func fenceState(p *proctest.Proc) (serving, fenced, ok bool) {
	c := seqv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+p.API)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req := connect.NewRequest(&seqv1.ClusterStatusRequest{})
	req.Header().Set("Seqd-Local-Only", "1")
	st, err := c.ClusterStatus(ctx, req)
	if err != nil {
		return false, false, false
	}
	for _, n := range st.Msg.GetNodes() {
		if n.GetId() == p.ID {
			for _, g := range n.GetGroups() {
				serving = serving || g.GetServing()
			}
			return serving || n.GetServing(), n.GetFenced(), true
		}
	}
	return false, false, false
}

// A restore replaces a cluster whose servers were stopped (kill -9) or
// frozen (SIGSTOP) rather than stopped: the restored server, started as
// the documented procedure says (a --join naming the old servers), serves;
// when the old servers come back with their data (a restart, or SIGCONT),
// none of them may serve again, even for a moment: they hear of the restore
// (the restored server knocks on their addresses; they listen that long
// before serving, after a start or a lapsed lease) and are fenced for good.
// A client that only ever knew the old servers gets no value from them.
func TestRestoreFencesAReturningSourceBeforeItServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts, stops and freezes real processes")
	}
	for _, mode := range []string{"frozen", "killed"} {
		t.Run(mode, func(t *testing.T) {
			src := proctest.Start(t, 3)
			leader := proctest.WaitLeader(t, src, nil, time.Minute)
			var addrs, gossip []string
			for _, p := range src {
				addrs = append(addrs, p.API)
				gossip = append(gossip, p.Gossip)
			}
			cl, err := client.New(addrs, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if _, err := cl.Next(ctx, "default", 7); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "backup.db")
			if out, errOut, code := runCLI(t, nil, "backup", "--addr", leader.API, file); code != 0 {
				t.Fatalf("backup: %s %s", out, errOut)
			}
			var last uint64
			for range 3 {
				v, err := cl.Next(ctx, "default", 7)
				if err != nil {
					t.Fatal(err)
				}
				last = v[0]
			}
			for _, p := range src {
				if mode == "frozen" {
					p.Signal(syscall.SIGSTOP)
				} else {
					p.Kill9()
				}
			}
			r := &proctest.Proc{ID: "r1", API: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), Raft: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)),
				Gossip: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), Dir: filepath.Join(t.TempDir(), "r1")}
			if out, errOut, code := runCLI(t, nil, "restore", "--id", r.ID, "--data-dir", r.Dir, "--raft-addr", r.Raft, file); code != 0 {
				t.Fatalf("restore: %s %s", out, errOut)
			}
			r.Args = []string{"serve", "--id", r.ID, "--data-dir", r.Dir, "--api-addr", r.API, "--raft-addr", r.Raft, "--gossip-addr", r.Gossip,
				"--join", strings.Join(gossip, ",")}
			r.Start(t)
			t.Cleanup(r.Kill9)
			proctest.WaitLeader(t, []*proctest.Proc{r}, nil, time.Minute)
			rc, err := client.New([]string{r.API}, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			v, err := rc.Next(ctx, "default", 7)
			if err != nil || v[0] <= last {
				t.Fatalf("the restored server: %v %v (the old cluster reached %d)", v, err, last)
			}
			// The restored cluster grows (so r1 is no longer alone in gossip,
			// and only its knocks reach the old servers' addresses).
			r2 := &proctest.Proc{ID: "r2", API: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), Raft: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)),
				Gossip: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), Dir: filepath.Join(t.TempDir(), "r2")}
			r2.Args = []string{"serve", "--id", r2.ID, "--data-dir", r2.Dir, "--api-addr", r2.API, "--raft-addr", r2.Raft, "--gossip-addr", r2.Gossip,
				"--join", r.Gossip}
			r2.Start(t)
			t.Cleanup(r2.Kill9)
			proctest.WaitAdmitted(t, r2, time.Minute)
			// The old site comes back.
			for _, p := range src {
				if mode == "frozen" {
					p.Signal(syscall.SIGCONT)
				} else {
					p.Start(t)
				}
			}
			old, err := client.New(addrs, client.Options{RetryFor: 200 * time.Millisecond, AttemptTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			fenced := map[string]bool{}
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && len(fenced) < len(src); {
				for _, p := range src {
					serving, f, ok := fenceState(p)
					if ok && serving {
						t.Fatalf("%s, a server of the cluster the restore replaced, serves again", p.ID)
					}
					if f {
						fenced[p.ID] = true
					}
				}
				cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
				if v, err := old.Next(cctx, "default", 7); err == nil {
					t.Fatalf("a client of the old servers only got %v from them after the restore", v)
				}
				ccancel()
				time.Sleep(20 * time.Millisecond)
			}
			if len(fenced) < len(src) {
				for _, p := range src {
					b, _ := os.ReadFile(filepath.Join(p.Dir, "fenced"))
					t.Logf("%s's fence record: %s", p.ID, b)
				}
				t.Fatalf("fenced within 20 s: %v of %d", fenced, len(src))
			}
		})
	}
}
