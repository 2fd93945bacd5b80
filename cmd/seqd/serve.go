package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/group"
	"github.com/seqd/seqd/internal/cli"
	"github.com/seqd/seqd/internal/clockoffset"
	"github.com/seqd/seqd/server"
)

func serve(args []string) error {
	def := server.DefaultConfig()
	dc := def.Cluster
	fs := cli.NewFlagSet("serve", "seqd serve [flags]",
		"Runs a seqd node. With no flags it bootstraps a single-node cluster in ./seqd-data.\n"+
			"A node with existing state never bootstraps again: restart it with unchanged flags.")
	var (
		id            = fs.String("id", dc.ID, "unique, stable node ID")
		dataDir       = fs.String("data-dir", dc.DataDir, "directory for the raft log, FSM and snapshots")
		apiAddr       = fs.String("api-addr", def.APIAddr, "API listen address (Connect, gRPC, gRPC-Web; HTTP/1.1 and h2c)")
		redisAddr     = fs.String("redis-addr", "", "serve the Redis protocol (INCR, INCRBY, GET, MGET; see docs/redis.md) on this address too, e.g. 127.0.0.1:6379 (off by default; with --token-sequence clients AUTH with the token)")
		raftAddr      = fs.String("raft-addr", dc.RaftAddr, "raft TCP listen address")
		gossipAddr    = fs.String("gossip-addr", dc.GossipAddr, "gossip (memberlist) listen address, TCP and UDP")
		advAPI        = fs.String("advertise-api", "", "API address other nodes and clients use (default --api-addr)")
		advRaft       = fs.String("advertise-raft", "", "raft address other nodes use (default --raft-addr)")
		advGossip     = fs.String("advertise-gossip", "", "gossip address other nodes use (default --gossip-addr)")
		join          = fs.String("join", "", "comma-separated gossip addresses of other nodes (may include this node's own)")
		expect        = fs.Int("bootstrap-expect", dc.BootstrapExpect, "number of servers that form a new cluster (each must see every server its --join names); 0 never bootstraps")
		groups        = fs.Int("groups", 0, "raft groups of a new cluster, each leading a fixed share of the sections, leaders spread over the servers (0: one per bootstrap server, --bootstrap-expect; a new server joining a cluster adopts the cluster's count); fixed once the data directory holds state, and every server of a cluster must run the same count")
		assumeGone    = fs.String("assume-gone", "", "comma-separated IDs of voters gone for good (dead, disks lost): a restarting server counts them as having vouched when no leader can (see Operations); only if no server runs on an older copy of its data")
		lease         = fs.Duration("lease", dc.Lease, "leader lease L: a new leader serves L + margin after the last lease renewal it stored (or its election, if earlier); with the default raft timing a kill -9 of the leader costs about 1.3 s (median of 20 on a 2-core VM)")
		handoff       = fs.Bool("lease-handoff", dc.LeaseHandoff, "planned leadership moves (balancing groups, seqd node drain, graceful shutdown) release the lease first, so the new leader serves without a lease wait; --lease-handoff=false makes every new leader wait out the lease")
		follow        = fs.Bool("leaders-follow-traffic", !dc.SpreadLeaders, "a group whose INCRs (Redis and Leaf front ends) enter mostly at one server is led from there, so they take no forward hop; --leaders-follow-traffic=false keeps the leaders spread over the servers whatever the traffic")
		leaseMargin   = fs.Duration("lease-margin", 0, "extra wait for clock-rate drift (default L/10, at least 50ms)")
		heartbeat     = fs.Duration("raft-heartbeat-timeout", dc.HeartbeatTimeout, "raft heartbeat timeout")
		election      = fs.Duration("raft-election-timeout", dc.ElectionTimeout, "raft election timeout")
		leaderLease   = fs.Duration("raft-leader-lease-timeout", dc.LeaderLeaseTimeout, "raft's leader lease timeout (step-down without quorum contact)")
		commit        = fs.Duration("raft-commit-timeout", dc.CommitTimeout, "raft commit timeout")
		snapThreshold = fs.Uint64("snapshot-threshold", dc.SnapshotThreshold, "raft entries between snapshots")
		snapInterval  = fs.Duration("snapshot-interval", dc.SnapshotInterval, "how often raft checks whether to snapshot")
		maxVoters     = fs.Int("max-voters", dc.MaxVoters, "voters the leader promotes joining servers to; more servers stay non-voters")
		minVoters     = fs.Int("min-voters", dc.MinVoters, "dead-server cleanup never takes the voters below this")
		deadGrace     = fs.Duration("dead-server-grace", 0, "remove a server gossip has seen down this long (0: never; use seqd node remove)")
		maxKeys       = fs.Int("max-keys-per-section", 0, "bound on keys held in memory per section (0: unbounded)")
		logLevel      = fs.String("log-level", "info", "log level: debug, info, warn, error")
		logFormat     = fs.String("log-format", "text", "log format: text or json")
		raftLogLevel  = fs.String("raft-log-level", strings.ToLower(dc.RaftLogLevel.String()), "level of raft's and memberlist's own logs")
		tlsCert       = fs.String("tls-cert", "", "API TLS certificate (PEM); with --tls-key the API speaks HTTPS only")
		tlsKey        = fs.String("tls-key", "", "API TLS private key (PEM)")
		tlsCA         = fs.String("tls-ca", "", "CA bundle (PEM) to verify other nodes' API certificates (default: system roots)")
		raftCert      = fs.String("raft-tls-cert", "", "certificate for mutual TLS between servers' raft (PEM)")
		raftKey       = fs.String("raft-tls-key", "", "key for raft mutual TLS (PEM)")
		raftCA        = fs.String("raft-tls-ca", "", "CA that signs every server's raft certificate (PEM)")
		gossipKey     = fs.String("gossip-key", "", "base64 key (16, 24 or 32 bytes) that encrypts gossip; the same on every server")
		token         = fs.String("token", "", "bearer token required on AdminService calls (prefer SEQD_TOKEN to keep it out of ps)")
		tokenSeq      = fs.Bool("token-sequence", false, "require the token on SequenceService and IdService calls too")
		secretFile    = fs.String("cluster-secret-file", "", "file holding the cluster secret (at least 16 bytes, the same on every server) that obfuscated flake namespaces derive their keys from; never written to the log or snapshots")
		clockOffset   = fs.String("unsafe-clock-offset-file", "", "TESTING ONLY: add the integer number of milliseconds in this file (re-read every 100ms) to this node's wall clock, as harnesses that step clocks do")
		corsOrigins   = fs.String("cors-origin", "", "comma-separated browser origins allowed to call the API (CORS for Connect and gRPC-Web; * for any)")
		unsafeNoLease = fs.Bool("unsafe-disable-lease", false, "TESTING ONLY: serve without the leader lease; breaks per-key order when an old leader keeps serving after a new one is elected")
		unsafeHooks   = fs.Bool("unsafe-test-hooks", false, "TESTING ONLY (chaos tests): serve POST /debug/seqd/cut-group?group=G&cut=1|0 on the API listener, which cuts (1) or restores (0) one raft group's traffic on this server; anyone who reaches the API may use it")
		unsafeTrust   = fs.Bool("unsafe-flake-trust-clock", false, "TESTING ONLY: a naive Snowflake: flake grants start at the leader's wall-clock time, ignoring each worker's high-water mark and the namespace's floor, and a leader with a skewed clock still grants; flake ids repeat when clocks step back (set it on every server or none)")
		shutdownWait  = fs.Duration("shutdown-timeout", 10*time.Second, "how long a graceful shutdown may take")
		pprofAddr     = fs.String("pprof-addr", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:7790 (off by default; keep it private)")
	)
	operands, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(operands) > 0 {
		return cli.Usagef("serve takes no arguments, got %q", operands)
	}
	lvl, err := parseLevel(*logLevel)
	if err != nil {
		return err
	}
	rlvl, err := parseLevel(*raftLogLevel)
	if err != nil {
		return err
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})
	case "json":
		handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})
	default:
		return cli.Usagef("--log-format must be text or json, got %q", *logFormat)
	}
	logger := slog.New(handler)
	if *id == "" {
		return cli.Usagef("--id is required (the host name is unknown)")
	}
	if *expect < 0 {
		return cli.Usagef("--bootstrap-expect must be 0 or more, got %d", *expect)
	}
	if *groups != 0 && seqd.ValidGroups(*groups) != nil {
		return cli.Usagef("--groups must be 1 to %d, got %d", seqd.MaxGroups, *groups)
	}
	for _, a := range []struct {
		what      string
		bind, adv *string
	}{{"API", apiAddr, advAPI}, {"raft", raftAddr, advRaft}, {"gossip", gossipAddr, advGossip}} {
		if err := advertise(a.what, *a.bind, a.adv); err != nil {
			return err
		}
	}
	joins := splitList(*join)
	gone := splitList(*assumeGone)

	var gkey []byte
	if *gossipKey != "" {
		if gkey, err = base64.StdEncoding.DecodeString(*gossipKey); err != nil {
			return cli.Usagef("--gossip-key is not base64: %v", err)
		}
	}
	var secret []byte
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return cli.Usagef("--cluster-secret-file: %v", err)
		}
		if secret = []byte(strings.TrimSpace(string(b))); len(secret) < flake.MinSecretLen {
			return cli.Usagef("--cluster-secret-file: the secret has %d bytes, at least %d needed", len(secret), flake.MinSecretLen)
		}
	}
	var wallClock func() int64
	if *clockOffset != "" {
		logger.Warn("UNSAFE: the wall clock is offset by the milliseconds in --unsafe-clock-offset-file (testing only)", "file", *clockOffset)
		wallClock = clockoffset.New(*clockOffset).NowMs
	}
	if *tokenSeq && *token == "" {
		return cli.Usagef("--token-sequence needs --token")
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return cli.Usagef("--tls-cert and --tls-key go together")
	}
	var serverTLS, peerTLS *tls.Config
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return cli.Usagef("API TLS key pair: %v", err)
		}
		serverTLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
		peerTLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if *tlsCA != "" {
			pool, err := cli.LoadCA(*tlsCA)
			if err != nil {
				return err
			}
			peerTLS.RootCAs = pool
		}
	}
	cfg := server.Config{
		APIAddr:   *apiAddr,
		RedisAddr: *redisAddr,
		Cluster: cluster.Config{
			ID: *id, DataDir: *dataDir,
			RaftAddr: *raftAddr, RaftAdvertise: *advRaft,
			GossipAddr: *gossipAddr, GossipAdvertise: *advGossip,
			APIAddr: *advAPI, Join: joins, BootstrapExpect: *expect, AssumeGone: gone, Groups: *groups,
			Options: group.Options{
				Lease: *lease, LeaseMargin: *leaseMargin, LeaseHandoff: *handoff,
				HeartbeatTimeout: *heartbeat, ElectionTimeout: *election,
				LeaderLeaseTimeout: *leaderLease, CommitTimeout: *commit,
				SnapshotThreshold: *snapThreshold, SnapshotInterval: *snapInterval,
				MaxKeysPerSection: *maxKeys, UnsafeDisableLease: *unsafeNoLease, UnsafeFlakeTrustClock: *unsafeTrust,
				RaftLogLevel: rlvl,
			},
			MaxVoters: *maxVoters, MinVoters: *minVoters, DeadServerGrace: *deadGrace, SpreadLeaders: !*follow,
			RaftTLS: cluster.RaftTLS{CertFile: *raftCert, KeyFile: *raftKey, CAFile: *raftCA}, GossipKey: gkey,
			WallClock: wallClock,
		},
		ClusterSecret: secret,
		TLS:           serverTLS, PeerTLS: peerTLS,
		Token: *token, TokenSequence: *tokenSeq,
		CORSOrigins:     splitList(*corsOrigins),
		Logger:          logger,
		UnsafeTestHooks: *unsafeHooks,
	}
	if *pprofAddr != "" {
		pln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("--pprof-addr: %w", err)
		}
		defer pln.Close()
		go func() { _ = http.Serve(pln, pprofMux()) }()
		logger.Info("profiler serving", "addr", pln.Addr().String())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	for {
		adopt, err := runNode(cfg, logger, sig, *shutdownWait)
		if err != nil || adopt == 0 {
			return err
		}
		// A server without raft state adopts its cluster's group count
		// (cluster/adopt.go): record it and start again.
		if err := cluster.AdoptGroups(*dataDir, adopt); err != nil {
			return err
		}
		logger.Info("starting again with the cluster's raft group count", "groups", adopt)
	}
}

// runNode runs one seqd node until a signal, a failure of its API server, or
// its request to start again with the cluster's group count, which it
// returns (0 otherwise).
func runNode(cfg server.Config, logger *slog.Logger, sig <-chan os.Signal, shutdownWait time.Duration) (adopt int, err error) {
	srv, err := server.New(cfg)
	if err != nil {
		if errors.Is(err, cluster.ErrInvalidConfig) {
			return 0, cli.Usagef("%v", err)
		}
		return 0, err
	}
	cc := cfg.Cluster
	logger.Info("seqd serving", "id", cc.ID, "api", srv.Addr().String(), "redis", cfg.RedisAddr, "raft", srv.Node().RaftAddr(),
		"gossip", cc.GossipAddr, "data_dir", cc.DataDir, "bootstrap_expect", cc.BootstrapExpect, "join", cc.Join,
		"groups", srv.Node().Groups())
	var runErr error
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case err := <-srv.Err():
		runErr = fmt.Errorf("API server: %w", err)
	case <-srv.Node().RestartNeeded():
		adopt = srv.Node().AdoptCount()
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	// Hand leadership over first (a leader drops its lease before anything
	// else), then stop taking calls.
	if err := srv.Close(ctx); err != nil {
		logger.Warn("node shutdown", "err", err)
	}
	logger.Info("stopped")
	return adopt, runErr
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// pprofMux serves net/http/pprof's handlers under /debug/pprof/.
func pprofMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, cli.Usagef("unknown log level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

// advertise fills *adv, when empty, from the bind address: the same
// address, or for an unspecified host (0.0.0.0, ::) this machine's private
// IP with the bind port. It rejects addresses others cannot dial.
func advertise(what, bind string, adv *string) error {
	bhost, bport, err := net.SplitHostPort(bind)
	if err != nil || bport == "" {
		return cli.Usagef("%s address %q is not host:port", what, bind)
	}
	if *adv == "" {
		*adv = bind
		if ip := net.ParseIP(bhost); bhost == "" || (ip != nil && ip.IsUnspecified()) {
			priv, err := sockaddr.GetPrivateIP()
			if err != nil || priv == "" {
				return cli.Usagef("%s address %q: no private IP found to advertise; set --advertise-%s", what, bind, strings.ToLower(what))
			}
			*adv = net.JoinHostPort(priv, bport)
		}
	}
	host, port, err := net.SplitHostPort(*adv)
	if err != nil || port == "" || port == "0" {
		return cli.Usagef("advertised %s address %q is not host:port with a fixed port", what, *adv)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return cli.Usagef("advertised %s address %q: other nodes cannot dial an unspecified host", what, *adv)
	}
	return nil
}
