package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	healthv1 "github.com/seqd/seqd/api/gen/grpc/health/v1"
	"github.com/seqd/seqd/api/gen/grpc/health/v1/healthv1connect"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
)

// seen records, per request, the procedure, the Authorization header, the
// HTTP version and whether it came over TLS.
type seen struct {
	mu   sync.Mutex
	reqs []seenReq
}

type seenReq struct {
	path, auth, proto string
	tls               bool
}

func (s *seen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, seenReq{r.URL.Path, r.Header.Get("Authorization"), r.Proto, r.TLS != nil})
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// waitStreamTried waits (up to 10 s) until the node has seen the client's
// upgrade to NextStream's framed transport, which the client asks for in
// the background, and returns what the node saw meanwhile.
func waitStreamTried(t *testing.T, s *seen) []seenReq {
	t.Helper()
	var out []seenReq
	deadline := time.Now().Add(10 * time.Second)
	for {
		out = append(out, s.take()...)
		if slices.ContainsFunc(out, func(r seenReq) bool { return r.path == seqv1connect.SequenceServiceNextStreamProcedure }) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no NextStream request in 10s: %+v", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *seen) take() []seenReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.reqs
	s.reqs = nil
	return out
}

type serving struct {
	healthv1connect.UnimplementedHealthHandler
}

func (serving) Check(context.Context, *connect.Request[healthv1.HealthCheckRequest]) (*connect.Response[healthv1.HealthCheckResponse], error) {
	return connect.NewResponse(&healthv1.HealthCheckResponse{Status: healthv1.HealthCheckResponse_SERVING}), nil
}

// hinting is a SequenceService that refuses every call with unavailable,
// naming another node as the leader.
type hinting struct {
	seqv1connect.UnimplementedSequenceServiceHandler
	leader string
}

func (h hinting) Next(context.Context, *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	err := connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
	err.Meta().Set(seqd.HeaderLeader, h.leader)
	return nil, err
}

// node is one fake node: a SequenceService (counting, or hinting at a
// leader), an AdminService that streams a backup, and a health service,
// recording what it sees. With useTLS it serves HTTPS (HTTP/1.1 and HTTP/2)
// with httptest's certificate for 127.0.0.1.
func startNode(t *testing.T, useTLS bool, seq seqv1connect.SequenceServiceHandler) (addr string, s *seen, ca *x509.CertPool) {
	t.Helper()
	if f, ok := seq.(*fake); ok {
		f.cur = map[uint64]uint64{}
	}
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(seq))
	mux.Handle(seqv1connect.NewAdminServiceHandler(&backupNode{chunks: []string{"state"}}))
	mux.Handle(healthv1connect.NewHealthHandler(serving{}))
	s = &seen{}
	srv := httptest.NewUnstartedServer(s.wrap(mux))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	if useTLS {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		ca = x509.NewCertPool()
		ca.AddCert(srv.Certificate())
	} else {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &p
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), s, ca
}

// TestToken: with Options.Token every call carries Authorization: Bearer
// TOKEN, unary (Next, coalesced or not; Current; ClusterStatus's service)
// and streaming (Backup; the upgrade to NextStream's framed transport, which
// the client opens in the background after its first coalesced call, and
// which this fake node refuses as unimplemented) alike; without it, none
// does.
func TestToken(t *testing.T) {
	for _, token := range []string{"s3cret", ""} {
		addr, s, _ := startNode(t, false, &fake{})
		c, err := client.New([]string{addr}, client.Options{Token: token, DisableRouting: true, RetryFor: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.Next(ctx, "default", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Current(ctx, "default", 1, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Backup(ctx, &strings.Builder{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Health(ctx, ""); err != nil {
			t.Fatal(err)
		}
		reqs := waitStreamTried(t, s)
		if len(reqs) != 5 {
			t.Fatalf("token %q: the node saw %d requests, want 5 (NextStream among them): %+v", token, len(reqs), reqs)
		}
		want := ""
		if token != "" {
			want = "Bearer " + token
		}
		for _, r := range reqs {
			if r.auth != want {
				t.Errorf("token %q: %s carried Authorization %q, want %q", token, r.path, r.auth, want)
			}
		}
	}
}

// TestTLS: with Options.TLS the client calls host:port addresses over
// HTTPS, verifying the node's certificate against the given roots: HTTP/1.1
// for Connect by default, HTTP/2 for gRPC or with HTTP2. (The upgrade to
// NextStream's framed transport, HTTP/1.1 over TLS, is refused by this
// fake node before its handler, and the calls go unary; cmd/seqd's
// TestSecurity streams over TLS with a real cluster.) A leader hint
// (host:port) is followed over HTTPS too. Without TLS, or with roots that
// do not hold the node's CA, no call succeeds.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	leader, ls, ca := startNode(t, true, &fake{})
	for _, c := range []struct {
		opts  client.Options
		proto string
	}{
		{client.Options{}, "HTTP/1.1"},
		{client.Options{HTTP2: true}, "HTTP/2.0"},
		{client.Options{Protocol: client.GRPC}, "HTTP/2.0"},
		{client.Options{Protocol: client.GRPCWeb}, "HTTP/1.1"},
	} {
		opts := c.opts
		opts.TLS = &tls.Config{RootCAs: ca}
		opts.Token = "s3cret"
		opts.DisableRouting = true
		cl, err := client.New([]string{leader}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Next(ctx, "default", 7); err != nil {
			t.Fatalf("%+v: Next over TLS: %v", c.opts, err)
		}
		if st, err := cl.Health(ctx, ""); err != nil || st != healthv1.HealthCheckResponse_SERVING {
			t.Fatalf("%+v: Health over TLS: %v %v", c.opts, st, err)
		}
		for _, r := range ls.take() {
			proto := c.proto
			if r.path == seqv1connect.SequenceServiceNextStreamProcedure {
				proto = "HTTP/1.1"
			}
			if !r.tls || r.proto != proto || r.auth != "Bearer s3cret" {
				t.Errorf("%+v: %s came over TLS %v, %s, Authorization %q; want TLS, %s, the token", c.opts, r.path, r.tls, r.proto, r.auth, proto)
			}
		}
	}

	// A follower (host:port, over TLS) names the leader by host:port.
	follower, fs, _ := startNode(t, true, hinting{leader: leader})
	cl, err := client.New([]string{follower}, client.Options{TLS: &tls.Config{RootCAs: ca}, DisableRouting: true, RetryFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Next(ctx, "default", 7); err != nil {
		t.Fatalf("Next through a follower's hint over TLS: %v", err)
	}
	// Unary requests (the client opens its streams in the background).
	unary := func(rs []seenReq) int {
		n := 0
		for _, r := range rs {
			if r.path != seqv1connect.SequenceServiceNextStreamProcedure {
				n++
			}
		}
		return n
	}
	if f, l := unary(fs.take()), unary(ls.take()); f != 1 || l != 1 || cl.Leader() != leader {
		t.Fatalf("follower saw %d unary requests, leader %d, client now calls %s; want 1, 1, %s", f, l, cl.Leader(), leader)
	}

	// No TLS against a TLS node, and TLS without the node's CA: refused.
	for name, opts := range map[string]client.Options{
		"plain HTTP":    {},
		"an unknown CA": {TLS: &tls.Config{RootCAs: x509.NewCertPool()}},
	} {
		opts.DisableRouting = true
		opts.RetryFor = 200 * time.Millisecond
		cl, err := client.New([]string{leader}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Next(ctx, "default", 7); err == nil {
			t.Errorf("%s: a call to a TLS node succeeded", name)
		} else if name == "an unknown CA" && !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a certificate error", name, err)
		}
	}
	if n := len(ls.take()); n != 0 {
		t.Errorf("the leader's handler saw %d requests from clients whose handshake must fail", n)
	}
}
