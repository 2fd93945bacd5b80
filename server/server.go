// Package server assembles one seqd node: the cluster host (cluster/) with
// its raft group, the Connect API (api/), Prometheus metrics (metrics/) and
// the status page (ui/), behind one HTTP server. It is the only place that
// wires them together: `seqd serve` turns its flags into a Config, and the
// in-process test clusters (internal/testcluster) build every node through
// New, so tests run the production wiring (metrics, auth, TLS, CORS).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/group"
	"github.com/seqd/seqd/metrics"
	"github.com/seqd/seqd/resp"
	"github.com/seqd/seqd/ui"
)

// Config is everything a node needs. DefaultConfig gives the defaults
// `seqd serve` documents; a zero field of Cluster falls back to cluster's
// own default.
type Config struct {
	// Cluster configures the host and its raft groups. Its Peers and
	// OnRaise are filled by New (the API's peer client and the metrics)
	// unless set.
	Cluster cluster.Config

	// APIAddr is the API's listen address, unless APIListener is given (a
	// test's listener on 127.0.0.1:0). Cluster.APIAddr is the address
	// other servers and clients use (default: the listener's).
	APIAddr     string
	APIListener net.Listener

	// TLS, when set, makes the API speak HTTPS only (HTTP/1.1 and HTTP/2).
	// PeerTLS verifies other servers' API certificates when this server
	// calls them (nil: plain HTTP, or system roots when TLS is set).
	TLS, PeerTLS *tls.Config

	// Token, when set, is the bearer token required on AdminService calls,
	// and on SequenceService calls too with TokenSequence.
	Token         string
	TokenSequence bool

	// ClusterSecret is the secret flake obfuscation keys derive from (the
	// same on every server; at least 16 bytes). It is never written to the
	// Raft log or snapshots. Without it, obfuscated namespaces are refused.
	ClusterSecret []byte

	// CORSOrigins lists the browser origins allowed to call the API ("*":
	// any; none: no CORS).
	CORSOrigins []string

	// RedisAddr, when set (or RedisListener), serves the Redis protocol
	// front end (resp/) there: INCR, INCRBY, GET, MGET and what stock
	// clients send to connect. With TokenSequence its clients must AUTH
	// with the token.
	RedisAddr     string
	RedisListener net.Listener

	// Logger receives every log line (default slog.Default()).
	Logger *slog.Logger

	// UnsafeTestHooks serves test hooks on the API listener, for chaos
	// tests only (seqd serve --unsafe-test-hooks): POST
	// /debug/seqd/cut-group?group=G&cut=1|0 cuts (1) or restores (0) raft
	// group G's traffic on this server (cluster.Node.CutGroupTraffic).
	// Off, the path is not found (404) like any unknown one.
	UnsafeTestHooks bool
}

// The defaults of `seqd serve`, written once.
const (
	DefaultDataDir    = "./seqd-data"
	DefaultAPIAddr    = "127.0.0.1:7700"
	DefaultRaftAddr   = "127.0.0.1:7701"
	DefaultGossipAddr = "127.0.0.1:7702"
)

// DefaultConfig returns the configuration of a single node that
// bootstraps its own cluster in ./seqd-data on the loopback addresses,
// named after the host.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		APIAddr: DefaultAPIAddr,
		Cluster: cluster.Config{
			ID:              host,
			DataDir:         DefaultDataDir,
			RaftAddr:        DefaultRaftAddr,
			GossipAddr:      DefaultGossipAddr,
			BootstrapExpect: 1,
			MaxVoters:       cluster.DefaultMaxVoters,
			MinVoters:       cluster.DefaultMinVoters,
			Options: group.Options{
				Lease:              cluster.DefaultLease,
				LeaseHandoff:       true,
				HeartbeatTimeout:   500 * time.Millisecond,
				ElectionTimeout:    500 * time.Millisecond,
				LeaderLeaseTimeout: 500 * time.Millisecond,
				CommitTimeout:      50 * time.Millisecond,
				SnapshotThreshold:  8192,
				SnapshotInterval:   2 * time.Minute,
				RaftLogLevel:       slog.LevelWarn,
			},
		},
	}
}

// Server is a running node.
type Server struct {
	node    *cluster.Node
	api     *api.Server
	metrics *metrics.Metrics
	http    *http.Server
	ln      net.Listener
	redis   *resp.Server // nil without RedisAddr
	log     *slog.Logger
	errc    chan error
}

// New starts a node: it listens on the API address, starts the cluster host
// (which opens the data directory, raft and gossip) and serves the API,
// metrics (/metrics) and the status page (/ui/) on one HTTP server. An
// invalid configuration fails with an error wrapping
// cluster.ErrInvalidConfig. On any error the API listener (cfg's or its
// own) is closed.
func New(cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cc := cfg.Cluster
	cc.Logger = log
	peers := api.Peers{TLS: cfg.PeerTLS, Token: cfg.Token}
	if cfg.TLS != nil && peers.TLS == nil {
		peers.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cc.Peers == nil {
		cc.Peers = peers.Host()
	}
	met := metrics.New()
	if cc.OnRaise == nil {
		cc.OnRaise = met.ObserveRaise
	}
	if cfg.TokenSequence && cfg.Token == "" {
		if cfg.APIListener != nil {
			cfg.APIListener.Close()
		}
		return nil, fmt.Errorf("%w: a token on sequence calls needs a token", cluster.ErrInvalidConfig)
	}
	ln := cfg.APIListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.APIAddr); err != nil {
			if cfg.RedisListener != nil {
				cfg.RedisListener.Close()
			}
			return nil, fmt.Errorf("API listener: %w", err)
		}
	}
	rln := cfg.RedisListener
	if rln == nil && cfg.RedisAddr != "" {
		var err error
		if rln, err = net.Listen("tcp", cfg.RedisAddr); err != nil {
			ln.Close()
			return nil, fmt.Errorf("redis listener: %w", err)
		}
	}
	if cc.APIAddr == "" {
		cc.APIAddr = ln.Addr().String()
	}
	node, err := cluster.Start(cc)
	if err != nil {
		ln.Close()
		if rln != nil {
			rln.Close()
		}
		return nil, err
	}
	if cc.UnsafeDisableLease {
		log.Warn("--unsafe-disable-lease is set: this node may return values out of order; never use it outside tests")
	}
	if cc.UnsafeFlakeTrustClock {
		log.Warn("--unsafe-flake-trust-clock is set: flake ids may repeat when clocks step back; never use it outside tests")
	}
	met.SetNode(node)
	s := &Server{node: node, metrics: met, ln: ln, log: log, errc: make(chan error, 1)}
	s.api = api.New(node, log, api.WithPeers(peers), api.WithToken(cfg.Token, cfg.TokenSequence), api.WithClusterSecret(cfg.ClusterSecret),
		api.WithStreamAnswers(met.NextAnswered))
	met.SetFlake(func() []metrics.FlakeStat {
		var out []metrics.FlakeStat
		for _, f := range s.api.FlakeStats() {
			out = append(out, metrics.FlakeStat{Namespace: f.Namespace, Issued: f.Issued, Fenced: f.Fenced, Workers: f.Workers,
				Capacity: f.Capacity, RangeRemaining: f.RangeRemaining, Lead: f.Lead, LastRenewal: f.LastRenewal,
				LifetimeRemaining: f.LifetimeRemaining})
		}
		return out
	})
	mux := http.NewServeMux()
	mux.Handle("/metrics", met.Handler())
	mux.Handle("/ui/", ui.Handler())
	mux.Handle("/", s.api.Handler(connect.WithInterceptors(met.Interceptor())))
	if cfg.UnsafeTestHooks {
		log.Warn("--unsafe-test-hooks is set: anyone who reaches the API can cut raft groups off; never use it outside tests")
		mux.HandleFunc("POST /debug/seqd/cut-group", s.cutGroup)
	}
	if rln != nil {
		token := ""
		if cfg.TokenSequence {
			token = cfg.Token
		}
		// Serve fails only without a backend, which it has.
		s.redis, _ = resp.Serve(rln, resp.Config{Backend: s.api.Sequences(), Token: token, Info: s.respInfo, Logger: log})
		log.Info("Redis protocol front end serving", "addr", rln.Addr().String())
	}
	s.http = api.NewHTTPServer(api.CORS(cfg.CORSOrigins, mux))
	if cfg.TLS != nil {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetHTTP2(true)
		s.http.Protocols = &p
		s.http.TLSConfig = cfg.TLS
		go func() { s.errc <- s.http.ServeTLS(ln, "", "") }()
	} else {
		go func() { s.errc <- s.http.Serve(ln) }()
	}
	return s, nil
}

// cutGroup serves POST /debug/seqd/cut-group?group=G&cut=1|0 (with
// UnsafeTestHooks only).
func (s *Server) cutGroup(w http.ResponseWriter, r *http.Request) {
	g, err := strconv.Atoi(r.URL.Query().Get("group"))
	if err != nil || g < 0 || g >= s.node.Groups() {
		http.Error(w, fmt.Sprintf("group must be 0 to %d", s.node.Groups()-1), http.StatusBadRequest)
		return
	}
	var cut bool
	switch r.URL.Query().Get("cut") {
	case "1":
		cut = true
	case "0":
	default:
		http.Error(w, "cut must be 1 or 0", http.StatusBadRequest)
		return
	}
	s.node.CutGroupTraffic(g, cut)
	s.log.Warn("test hook: raft group traffic", "group", g, "cut", cut)
	fmt.Fprintf(w, "group %d cut %v\n", g, cut)
}

// respInfo is what the Redis front end's INFO and HELLO report.
func (s *Server) respInfo() resp.Info {
	inf := resp.Info{NodeID: s.node.ID(), ClusterID: s.node.ClusterID(), Version: buildVersion(), Groups: s.node.Groups()}
	for g := range inf.Groups {
		if s.node.Group(g).IsLeader() {
			inf.Leads = append(inf.Leads, g)
		}
	}
	return inf
}

// buildVersion is the VCS revision seqd was built from, or "dev".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" && len(st.Value) >= 12 {
				return st.Value[:12]
			}
		}
	}
	return "dev"
}

// Sequences returns the node's in-process sequence calls (the Redis front
// end's backend).
func (s *Server) Sequences() *api.Sequences { return s.api.Sequences() }

// RedisAddr returns the Redis front end's address, or nil without one.
func (s *Server) RedisAddr() net.Addr {
	if s.redis == nil {
		return nil
	}
	return s.redis.Addr()
}

// Node returns the cluster host.
func (s *Server) Node() *cluster.Node { return s.node }

// Addr returns the API listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Err delivers the HTTP server's error if it stops serving on its own.
func (s *Server) Err() <-chan error { return s.errc }

// Close stops the node gracefully within ctx: a leader hands leadership
// over first (dropping its lease before anything else), then the node
// stops, then the API stops taking calls: it lets the calls in flight
// finish for up to apiDrain, then closes what connections are left.
func (s *Server) Close(ctx context.Context) error {
	// Workers go back first, while the cluster can still commit it.
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	if err := s.api.Close(rctx); err != nil {
		s.log.Info("releasing flake workers", "err", err)
	}
	cancel()
	err := s.node.Shutdown(ctx)
	// The node is out of the cluster: a call still running can only fail
	// or finish a forward. An HTTP/2 peer that holds an idle connection
	// open after the server's GOAWAY would keep Shutdown waiting for a
	// second (net/http's goAwayTimeout), so the wait is bounded.
	if s.redis != nil {
		s.redis.Close()
	}
	hctx, hcancel := context.WithTimeout(ctx, apiDrain)
	herr := s.http.Shutdown(hctx)
	hcancel()
	if errors.Is(herr, context.DeadlineExceeded) {
		s.log.Debug("API connections still open after the drain; closing them")
		herr = s.http.Close()
	}
	if herr != nil && !errors.Is(herr, http.ErrServerClosed) {
		s.log.Warn("API server shutdown", "err", herr)
	}
	return err
}

// apiDrain bounds how long a stopping server waits for its API calls in
// flight once the node has left.
const apiDrain = 250 * time.Millisecond

// Kill stops the node as a crash would: API connections dropped, no
// leadership handover, no gossip leave.
func (s *Server) Kill() error {
	s.http.Close()
	if s.redis != nil {
		s.redis.Close()
	}
	// The holders stop at once; their workers are not released (as in a
	// crash: the leader reclaims them once their leases lapse).
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.api.Close(dead)
	return s.node.Kill()
}
