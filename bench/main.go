// Command seqd-compare runs seqd's load generator (internal/loadgen, the one
// behind `seqbench`) against other id services, so that their numbers come
// from the same workload, the same loop and the same histograms:
//
//	redis      INCR of the key, through go-redis (one connection per caller)
//	redis-pipe INCR of --batch keys pipelined in one round trip, through go-redis
//	rueidis    INCR of the key through rueidis, one client shared by every
//	           caller: concurrent commands are pipelined automatically over
//	           one connection (a call of --batch keys is one DoMulti)
//	postgres   SELECT nextval('seqd_bench') through pgx (one sequence for all
//	           keys, as pgbench measures it; --pg-per-key: an upsert per key)
//	etcd       compare-and-swap increment of the key (get, then a txn
//	           conditioned on the mod revision, retried on conflict)
//	http-get   GET of a URL (--addr: comma-separated URLs, the callers
//	           spread over them) through net/http with keep-alive, HTTP/1.1,
//	           one connection per caller; a 200 answer is one id (Leaf's
//	           GET /api/segment/get/{tag} on seqd's API port)
//
// It lives in its own module so that seqd itself never depends on these
// client libraries. `seqd-compare table FILE...` turns JSON reports (from
// this command and from `seqbench --json`) into a markdown table.
//
// scripts/compare.sh starts the servers and runs everything.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seqd/seqd/internal/loadgen"
)

type report struct {
	Target string            `json:"target"`
	Label  string            `json:"label,omitempty"`
	Runs   []*loadgen.Result `json:"runs"`
	Median *loadgen.Result   `json:"median"`
	// Load is the machine's 1-minute load average before and after.
	Load [2]float64 `json:"load_1m"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "merge" {
		if err := merge(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "seqd-compare:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "table" {
		if err := table(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "seqd-compare:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "seqd-compare:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("seqd-compare", flag.ContinueOnError)
	var (
		target   = fs.String("target", "", "redis, redis-pipe, rueidis, postgres, etcd or http-get")
		addr     = fs.String("addr", "", "server address(es), comma-separated (postgres: a connection string)")
		label    = fs.String("label", "", "label for the table (default: the target)")
		conc     = fs.Int("concurrency", 16, "concurrent callers")
		duration = fs.Duration("duration", 10*time.Second, "how long to measure, after the warmup")
		warmup   = fs.Duration("warmup", time.Second, "load before measuring")
		rate     = fs.Float64("rate", 0, "target calls/s (0: closed loop)")
		keys     = fs.Uint64("keys", 1000000, "distinct keys")
		dist     = fs.String("dist", "uniform", "uniform, zipf or sequential")
		batch    = fs.Int("batch", 1, "keys per call (redis-pipe: pipeline depth)")
		runs     = fs.Int("runs", 1, "runs; the median by ids/s is reported")
		pause    = fs.Duration("pause", 2*time.Second, "pause between runs")
		perKey   = fs.Bool("pg-per-key", false, "postgres: one counter row per key (INSERT .. ON CONFLICT DO UPDATE .. RETURNING) instead of nextval")
		jsonOut  = fs.Bool("json", false, "print the JSON report on stdout")
		cpuPIDs  = fs.String("cpu-pids", "", "comma-separated IDs of server processes whose CPU time over the measured run is reported with this process's own (Linux)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var t loadgen.Target
	var closeFn func()
	var err error
	switch *target {
	case "redis", "redis-pipe":
		t, closeFn, err = redisTarget(*addr, *conc, *target == "redis-pipe")
	case "rueidis":
		t, closeFn, err = rueidisTarget(*addr)
	case "postgres":
		t, closeFn, err = pgTarget(ctx, *addr, *conc, *perKey)
	case "etcd":
		t, closeFn, err = etcdTarget(*addr)
	case "http-get":
		t, closeFn, err = httpGetTarget(*addr, *conc)
	default:
		return fmt.Errorf("unknown --target %q", *target)
	}
	if err != nil {
		return err
	}
	defer closeFn()
	cfg := loadgen.Config{Concurrency: *conc, Duration: *duration, Warmup: *warmup, Rate: *rate,
		Keys: *keys, Dist: *dist, Batch: *batch, Progress: os.Stderr}
	pids, err := loadgen.ParsePIDs(*cpuPIDs)
	if err != nil {
		return err
	}
	cfg.CPUPIDs = pids
	rep := &report{Target: *target, Label: *label}
	rep.Load[0] = loadgen.LoadAvg()
	if rep.Label == "" {
		rep.Label = *target
	}
	for i := range *runs {
		if i > 0 {
			time.Sleep(*pause)
		}
		res, err := loadgen.Run(ctx, t, cfg)
		if err != nil {
			return err
		}
		rep.Runs = append(rep.Runs, res)
		fmt.Fprint(os.Stderr, res.Summary())
		if ctx.Err() != nil {
			break
		}
	}
	if len(rep.Runs) == 0 {
		return errors.New("no run finished")
	}
	rep.Median = loadgen.MedianByIDs(rep.Runs)
	rep.Load[1] = loadgen.LoadAvg()
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

func key(k uint64) string { return "seqd:" + strconv.FormatUint(k, 10) }

// redisTarget INCRs each key (pipe: all keys of a call in one pipeline).
func redisTarget(addr string, conc int, pipe bool) (loadgen.Target, func(), error) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: conc, MinIdleConns: conc})
	if err := c.Ping(context.Background()).Err(); err != nil {
		return nil, nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	t := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		if op.Kind != loadgen.Next {
			return errors.New("redis target: only next")
		}
		if !pipe || len(op.Keys) == 1 {
			for _, k := range op.Keys {
				if err := c.Incr(ctx, key(k)).Err(); err != nil {
					return err
				}
			}
			return nil
		}
		p := c.Pipeline()
		for _, k := range op.Keys {
			p.Incr(ctx, key(k))
		}
		_, err := p.Exec(ctx)
		return err
	})
	return t, func() { c.Close() }, nil
}

// rueidisTarget INCRs each key through one rueidis client, which pipelines
// the concurrent callers' commands over one connection (its default,
// "auto pipelining"); the keys of one call go out as one DoMulti.
func rueidisTarget(addr string) (loadgen.Target, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, nil, fmt.Errorf("rueidis %s: %w", addr, err)
	}
	t := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		if op.Kind != loadgen.Next {
			return errors.New("rueidis target: only next")
		}
		if len(op.Keys) == 1 {
			return c.Do(ctx, c.B().Incr().Key(key(op.Keys[0])).Build()).Error()
		}
		cmds := make(rueidis.Commands, len(op.Keys))
		for i, k := range op.Keys {
			cmds[i] = c.B().Incr().Key(key(k)).Build()
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	return t, c.Close, nil
}

// httpGetTarget GETs the URLs in turn (each call one GET per key of the
// call, on the next URL) over HTTP/1.1 keep-alive connections.
func httpGetTarget(urls string, conc int) (loadgen.Target, func(), error) {
	us := strings.Split(urls, ",")
	if len(us) == 0 || us[0] == "" {
		return nil, nil, errors.New("http-get: --addr takes URLs")
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	tr := &http.Transport{Protocols: &protos, MaxIdleConnsPerHost: conc, MaxIdleConns: conc * len(us)}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next atomic.Uint64
	t := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		if op.Kind != loadgen.Next {
			return errors.New("http-get target: only next")
		}
		for range op.Keys {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, us[next.Add(1)%uint64(len(us))], nil)
			if err != nil {
				return err
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s: %s", req.URL, resp.Status, b)
			}
		}
		return nil
	})
	return t, tr.CloseIdleConnections, nil
}

// pgTarget takes nextval of one sequence, or upserts a counter row per key.
func pgTarget(ctx context.Context, dsn string, conc int, perKey bool) (loadgen.Target, func(), error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg.MaxConns = int32(conc)
	cfg.MinConns = int32(conc)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE SEQUENCE IF NOT EXISTS seqd_bench`); err != nil {
		pool.Close()
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS seqd_counters (k bigint PRIMARY KEY, v bigint NOT NULL)`); err != nil {
		pool.Close()
		return nil, nil, err
	}
	t := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		if op.Kind != loadgen.Next {
			return errors.New("postgres target: only next")
		}
		for _, k := range op.Keys {
			var v int64
			var err error
			if perKey {
				err = pool.QueryRow(ctx, `INSERT INTO seqd_counters (k, v) VALUES ($1, 1)
					ON CONFLICT (k) DO UPDATE SET v = seqd_counters.v + 1 RETURNING v`, int64(k)).Scan(&v)
			} else {
				err = pool.QueryRow(ctx, `SELECT nextval('seqd_bench')`).Scan(&v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return t, pool.Close, nil
}

// etcdTarget increments a key with compare-and-swap on its mod revision.
func etcdTarget(addrs string) (loadgen.Target, func(), error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(addrs, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	t := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		if op.Kind != loadgen.Next {
			return errors.New("etcd target: only next")
		}
		for _, k := range op.Keys {
			kk := key(k)
			for attempt := 0; ; attempt++ {
				g, err := c.Get(ctx, kk)
				if err != nil {
					return err
				}
				var cur uint64
				var rev int64
				if len(g.Kvs) > 0 {
					cur, _ = strconv.ParseUint(string(g.Kvs[0].Value), 10, 64)
					rev = g.Kvs[0].ModRevision
				}
				r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(kk), "=", rev)).
					Then(clientv3.OpPut(kk, strconv.FormatUint(cur+1, 10))).Commit()
				if err != nil {
					return err
				}
				if r.Succeeded {
					break
				}
				if attempt > 1000 {
					return errors.New("etcd: too many CAS conflicts")
				}
			}
		}
		return nil
	})
	return t, func() { c.Close() }, nil
}

// table prints a markdown table of median ids/s and latency from JSON
// reports (this command's and `seqbench --json`'s).
func table(files []string) error {
	fmt.Println("| target | concurrency | batch | calls/s | ids/s | p50 ms | p99 ms | p99.9 ms | max ms | client CPU µs/id | server CPU µs/id | runs | raft entries/s | load (median run) |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r struct {
			Target string            `json:"target"`
			Label  string            `json:"label"`
			Runs   []*loadgen.Result `json:"runs"`
			Median *loadgen.Result   `json:"median"`
			Load   [2]float64        `json:"load_1m"`
			Raft   *struct {
				EntriesPerSec float64 `json:"entries_per_s"`
				Changed       bool    `json:"leader_changed"`
			} `json:"raft"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if r.Median == nil {
			continue
		}
		name := r.Label
		if name == "" {
			name = strings.TrimSuffix(f[strings.LastIndex(f, "/")+1:], ".json")
		}
		m := r.Median
		raft := ""
		if r.Raft != nil && !r.Raft.Changed {
			raft = fmt.Sprintf("%.1f", r.Raft.EntriesPerSec)
		}
		lat := func(v float64) string {
			if v == 0 {
				return ""
			}
			return fmt.Sprintf("%.3f", v)
		}
		load := ""
		if r.Load != [2]float64{} {
			load = fmt.Sprintf("%.1f→%.1f", r.Load[0], r.Load[1])
		}
		cpuC, cpuS := "", ""
		if c := m.CPU; c != nil && m.IDs > 0 {
			cpuC, cpuS = fmt.Sprintf("%.2f", c.ClientUsPerID), fmt.Sprintf("%.2f", c.ServerUsPerID)
		}
		fmt.Printf("| %s | %d | %d | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", name, m.Concurrency, m.Batch,
			m.CallsPerSec, m.IDsPerSec, lat(m.Latency.P50), lat(m.Latency.P99), lat(m.Latency.P999), lat(m.Latency.Max),
			cpuC, cpuS, len(r.Runs), raft, load)
	}
	return nil
}

// merge writes to OUT one report made of the runs in the reports IN... (one
// run each, taken in turns with other targets), with the median run by ids/s
// and that run's other fields (raft, coalescing, load).
//
//	seqd-compare merge OUT IN...
func merge(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: merge OUT IN [IN ...]")
	}
	type entry struct {
		raw map[string]json.RawMessage
		res *loadgen.Result
	}
	var es []entry
	for _, f := range args[1:] {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		var med loadgen.Result
		if err := json.Unmarshal(raw["median"], &med); err != nil {
			return fmt.Errorf("%s: median: %w", f, err)
		}
		es = append(es, entry{raw, &med})
	}
	slices.SortFunc(es, func(a, b entry) int {
		switch {
		case a.res.IDsPerSec < b.res.IDsPerSec:
			return -1
		case a.res.IDsPerSec > b.res.IDsPerSec:
			return 1
		}
		return 0
	})
	out := es[len(es)/2].raw
	var runs []*loadgen.Result
	for _, e := range es {
		runs = append(runs, e.res)
	}
	b, _ := json.Marshal(runs)
	out["runs"] = b
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(args[0], append(b, '\n'), 0o644)
}
