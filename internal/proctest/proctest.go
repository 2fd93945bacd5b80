// Package proctest runs real seqd serve processes for tests and benchmarks:
// it builds cmd/seqd once per test binary, starts clusters of processes on
// free loopback ports, kills, signals and restarts them, and waits for a
// serving leader, a healthy cluster or a vouched-for server.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/seqd once per test run.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seqd-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "seqd")
		// Built in this module's root, so that a test of another module
		// (interop/) builds it with this module's dependencies.
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/seqd")
		_, file, _, _ := runtime.Caller(0)
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// handedOut holds every port FreePort returned: the kernel may hand a
// just-closed ephemeral port out again, and two servers of one test given
// the same port fail to start (seen: two raft ports equal in TestSecurity).
var handedOut sync.Map

// FreePort returns a port free for TCP and UDP on 127.0.0.1 right now (the
// gossip port needs both) and never returned before in this process.
func FreePort(t testing.TB) int {
	t.Helper()
	for {
		if p := freePortOnce(t); p > 0 {
			if _, dup := handedOut.LoadOrStore(p, true); !dup {
				return p
			}
		}
	}
}

func freePortOnce(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0
	}
	u.Close()
	return port
}

// Proc is one seqd serve process.
type Proc struct {
	ID                string
	API, Raft, Gossip string
	Dir               string
	Args              []string
	Env               []string // extra environment
	Bin               string   // the binary to run (default: this tree's seqd)
	mu                sync.Mutex
	cmd               *exec.Cmd
	log               *SyncBuffer
	done              chan struct{} // closed when the process has exited
}

func (p *Proc) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	bin := p.Bin
	if bin == "" {
		bin = Binary(t)
	}
	cmd := exec.Command(bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	p.log = &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	done := make(chan struct{})
	p.done = done
	go func() { cmd.Wait(); close(done) }()
}

// Done is closed when the process (last started) has exited.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// LogText returns what the process has logged so far.
func (p *Proc) LogText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// SyncBuffer is a bytes.Buffer safe for writers and readers at once (a
// process's log, a logger's output in a test).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (p *Proc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill9 kills the process (SIGKILL) and waits until it is gone.
func (p *Proc) Kill9() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

func Start(t testing.TB, n int, extra ...string) []*Proc {
	t.Helper()
	ps := New(t, n, extra...)
	for _, p := range ps {
		p.Start(t)
	}
	return ps
}

// New prepares n processes that form one cluster (same --join list,
// including each one's own address, and --bootstrap-expect n) without
// starting them.
func New(t testing.TB, n int, extra ...string) []*Proc {
	t.Helper()
	ps := make([]*Proc, n)
	var joins []string
	for i := range ps {
		ps[i] = &Proc{
			ID:     fmt.Sprintf("p%d", i+1),
			API:    fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			Raft:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			Gossip: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			Dir:    filepath.Join(t.TempDir(), fmt.Sprintf("p%d", i+1)),
		}
		joins = append(joins, ps[i].Gossip)
	}
	for _, p := range ps {
		p.Args = append([]string{"serve", "--id", p.ID, "--data-dir", p.Dir,
			"--api-addr", p.API, "--raft-addr", p.Raft, "--gossip-addr", p.Gossip,
			"--join", strings.Join(joins, ","), "--bootstrap-expect", strconv.Itoa(n)}, extra...)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.Kill9()
			if t.Failed() && p.log != nil {
				t.Logf("log of %s:\n%s", p.ID, p.log.String())
			}
		}
	})
	return ps
}

// LeaderOf asks each process which node leads and serves.
func LeaderOf(ps []*Proc) *Proc {
	for _, q := range ps {
		cl, err := client.New([]string{q.API}, client.Options{RetryFor: time.Millisecond, AttemptTimeout: 500 * time.Millisecond})
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		st, err := cl.ClusterStatus(ctx)
		cancel()
		if err != nil {
			continue
		}
		// A server that lost leadership may still say it serves until
		// it hears of the new term: the highest term decides.
		var leader *Proc
		var term uint64
		for _, n := range st.GetNodes() {
			if !n.GetServing() || (leader != nil && n.GetTerm() <= term) {
				continue
			}
			for _, p := range ps {
				if p.ID == n.GetId() {
					leader, term = p, n.GetTerm()
				}
			}
		}
		if leader != nil {
			return leader
		}
	}
	return nil
}

func WaitLeader(t testing.TB, ps []*Proc, exclude *Proc, timeout time.Duration) *Proc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := LeaderOf(ps); l != nil && l != exclude {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no serving leader within %v", timeout)
	return nil
}

// WaitAdmitted waits until process p reports itself vouched for (its raft
// gate open): a restarted server takes part in raft only from then, so a
// test that fails the leader next waits for it, as a rolling procedure does.
func WaitAdmitted(t testing.TB, p *Proc, timeout time.Duration) {
	t.Helper()
	cl, err := client.New([]string{p.API}, client.Options{RetryFor: time.Millisecond, AttemptTimeout: 500 * time.Millisecond, DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		st, err := cl.ClusterStatus(ctx)
		cancel()
		if err == nil {
			for _, n := range st.GetNodes() {
				if n.GetId() == p.ID && n.GetRaftOpen() {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s was not vouched for within %v; log:\n%s", p.ID, timeout, p.LogText())
}

// WaitHealthy waits until every process answers, all agree on the term and
// the leader, and the leader serves.
func WaitHealthy(t testing.TB, ps []*Proc, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leaders := map[string]bool{}
		terms := map[uint64]bool{}
		serving := false
		for _, q := range ps {
			cl, err := client.New([]string{q.API}, client.Options{RetryFor: time.Millisecond, AttemptTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := cl.ClusterStatus(ctx)
			cancel()
			if err != nil {
				leaders["?"] = true
				continue
			}
			leaders[st.GetLeaderId()] = true
			terms[st.GetTerm()] = true
			for _, n := range st.GetNodes() {
				serving = serving || n.GetServing()
			}
		}
		if len(leaders) == 1 && !leaders["?"] && !leaders[""] && len(terms) == 1 && serving {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("cluster not healthy within %v", timeout)
}

// PID returns the process ID of the process last started (0 if none).
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
