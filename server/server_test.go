package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/server"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// config is DefaultConfig on loopback ports of the test's own, in a
// temporary directory, with short raft timings.
func config(t *testing.T) server.Config {
	cfg := server.DefaultConfig()
	cfg.Cluster.ID = "s1"
	cfg.Cluster.DataDir = t.TempDir()
	cfg.Cluster.RaftAddr = freeAddr(t)
	cfg.Cluster.GossipAddr = freeAddr(t)
	cfg.Cluster.Lease = 200 * time.Millisecond
	cfg.Cluster.HeartbeatTimeout, cfg.Cluster.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
	cfg.Cluster.LeaderLeaseTimeout = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIListener = ln
	return cfg
}

// New assembles the whole node: sequence calls, the token on admin calls,
// metrics, the status page and CORS are all served on the API listener,
// and Close stops it.
func TestNewServesTheWholeNode(t *testing.T) {
	cfg := config(t)
	cfg.Token = "s3cret"
	cfg.CORSOrigins = []string{"https://app.example"}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = srv.Kill()
		}
	})
	addr := srv.Addr().String()
	c, err := client.New([]string{addr}, client.Options{RetryFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := c.Next(ctx, seqd.DefaultSpaceName, 7)
	if err != nil || len(v) != 1 || v[0] == 0 {
		t.Fatalf("Next = %v, %v", v, err)
	}
	if _, err := c.CreateSpace(ctx, "orders", 100, 10); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("CreateSpace without the token: %v, want unauthenticated", err)
	}

	get := func(path string, hdr map[string]string, method string) (*http.Response, string) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := get("/metrics", nil, "GET"); res.StatusCode != 200 || !strings.Contains(body, "seqd_") {
		t.Fatalf("/metrics: %d, seqd metrics present %v", res.StatusCode, strings.Contains(body, "seqd_"))
	}
	if res, _ := get("/ui/", nil, "GET"); res.StatusCode != 200 {
		t.Fatalf("/ui/: %d", res.StatusCode)
	}
	if res, _ := get("/debug/seqd/cut-group?group=0&cut=1", nil, "POST"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("the cut-group test hook without UnsafeTestHooks: %d, want 404", res.StatusCode)
	}
	res, _ := get("/seq.v1.SequenceService/Next", map[string]string{
		"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type",
	}, "OPTIONS")
	if res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("CORS preflight from an allowed origin: %d %v", res.StatusCode, res.Header)
	}

	closeCtx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClose()
	if err := srv.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	closed = true
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("the API still accepts connections after Close")
	}
}

// With UnsafeTestHooks, POST /debug/seqd/cut-group cuts and restores a
// group's raft traffic, and refuses a group the node does not have.
func TestUnsafeTestHooksCutGroup(t *testing.T) {
	cfg := config(t)
	cfg.UnsafeTestHooks = true
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Kill() })
	post := func(q string) int {
		res, err := http.Post("http://"+srv.Addr().String()+"/debug/seqd/cut-group?"+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for q, want := range map[string]int{"group=0&cut=1": 200, "group=0&cut=0": 200, "group=1&cut=1": 400, "group=0&cut=x": 400, "cut=1": 400} {
		if got := post(q); got != want {
			t.Errorf("cut-group?%s: %d, want %d", q, got, want)
		}
	}
}

// A configuration error comes back wrapping cluster.ErrInvalidConfig, and
// the API listener is released.
func TestNewRefusesBadConfig(t *testing.T) {
	cfg := config(t)
	cfg.Cluster.ID = ""
	_, err := server.New(cfg)
	if !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("New without an ID: %v", err)
	}
	ln, err := net.Listen("tcp", cfg.APIListener.Addr().String())
	if err != nil {
		t.Fatalf("the API listener was not released: %v", err)
	}
	ln.Close()
	cfg = config(t)
	cfg.TokenSequence = true
	if _, err := server.New(cfg); !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("New with TokenSequence and no token: %v", err)
	}
}
