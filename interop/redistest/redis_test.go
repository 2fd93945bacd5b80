package redistest

// Stock Redis clients against real seqd processes with --redis-addr:
// go-redis and rueidis with their default options, redis-py (Debian's
// python3-redis), and INCRs through rueidis while the group leaders are
// killed, checked for repeats and per-key order (internal/history).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/internal/proctest"
	"github.com/seqd/seqd/internal/testcluster"
)

// redisCluster starts n seqd processes (n raft groups, the default), each
// serving the Redis protocol, and waits until a key of every group answers
// an INCR. It returns the processes and their Redis addresses.
func redisCluster(t *testing.T, n int) ([]*proctest.Proc, []string) {
	t.Helper()
	ps := proctest.New(t, n)
	addrs := make([]string, n)
	for i, p := range ps {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
		p.Args = append(p.Args, "--redis-addr", addrs[i])
		p.Start(t)
	}
	c := redis.NewClient(&redis.Options{Addr: addrs[0], MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for _, k := range keysPerGroup(n) {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err := c.Incr(ctx, strconv.FormatUint(k, 10)).Err()
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %d: no answer within a minute: %v", k, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ps, addrs
}

// keysPerGroup returns a key of the default space in each of groups groups.
func keysPerGroup(groups int) []uint64 { return testcluster.KeyPerGroup(groups) }

// TestGoRedis drives seqd with go-redis on its default options (RESP3
// through HELLO 3, CLIENT SETINFO, a connection pool).
func TestGoRedis(t *testing.T) {
	_, addrs := redisCluster(t, 3)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	keys := keysPerGroup(3)
	for _, k := range keys {
		ks := strconv.FormatUint(k, 10)
		a, err := c.Incr(ctx, ks).Result()
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.IncrBy(ctx, "default:"+ks, 5).Result()
		if err != nil || b < a+5 {
			t.Fatalf("INCRBY 5 after %d = %d, %v", a, b, err)
		}
		got, err := c.Get(ctx, ks).Int64()
		if err != nil || got != b {
			t.Fatalf("GET = %d, %v; want %d", got, err, b)
		}
	}
	// A pipeline: answered in order, a key's values increasing.
	p := c.Pipeline()
	var cmds []*redis.IntCmd
	for range 100 {
		cmds = append(cmds, p.Incr(ctx, "4242"))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(cmds); i++ {
		if cmds[i].Val() <= cmds[i-1].Val() {
			t.Fatalf("pipelined INCR %d = %d after %d", i, cmds[i].Val(), cmds[i-1].Val())
		}
	}
	vals, err := c.MGet(ctx, strconv.FormatUint(keys[0], 10), "4242", "987654321").Result()
	if err != nil || len(vals) != 3 || vals[1] != strconv.FormatInt(cmds[99].Val(), 10) || vals[2] != "0" {
		t.Fatalf("MGET = %v, %v", vals, err)
	}
	// Concurrent callers over the pool: no value twice.
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				v, err := c.Incr(ctx, "777").Result()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[v] {
					t.Errorf("INCR 777 gave %d twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	err = c.Set(ctx, "a", "b", 0).Err()
	if err == nil || !strings.Contains(err.Error(), "unknown command 'set'") {
		t.Fatalf("SET: %v", err)
	}
	if err := c.Incr(ctx, "nosuch:1").Err(); err == nil || !strings.Contains(err.Error(), `unknown space "nosuch"`) {
		t.Fatalf("INCR nosuch:1: %v", err)
	}
	info, err := c.Info(ctx, "seqd").Result()
	if err != nil || !strings.Contains(info, "seqd_groups:3") {
		t.Fatalf("INFO seqd = %q, %v", info, err)
	}
}

// TestRueidis drives seqd with rueidis on its default options: RESP3,
// client-side caching on (CLIENT TRACKING ON OPTIN, accepted), auto
// pipelining. A cached read is refused (CLIENT CACHING), never served
// stale.
func TestRueidis(t *testing.T) {
	_, addrs := redisCluster(t, 3)
	ctx := context.Background()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addrs[2]}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.Do(ctx, c.B().Incr().Key("55").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Do(ctx, c.B().Incrby().Key("55").Increment(10).Build()).AsInt64()
	if err != nil || b < a+10 {
		t.Fatalf("INCRBY 10 after %d = %d, %v", a, b, err)
	}
	if got, err := c.Do(ctx, c.B().Get().Key("55").Build()).AsInt64(); err != nil || got != b {
		t.Fatalf("GET 55 = %d, %v; want %d", got, err, b)
	}
	cmds := make(rueidis.Commands, 50)
	for i := range cmds {
		cmds[i] = c.B().Incr().Key("56").Build()
	}
	var last int64
	for i, r := range c.DoMulti(ctx, cmds...) {
		v, err := r.AsInt64()
		if err != nil || v <= last {
			t.Fatalf("DoMulti INCR %d = %d, %v after %d", i, v, err, last)
		}
		last = v
	}
	// Many goroutines over one auto-pipelined client.
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 100 {
				v, err := c.Do(ctx, c.B().Incr().Key("57").Build()).AsInt64()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[v] {
					t.Errorf("INCR 57 gave %d twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 3200 {
		t.Fatalf("%d values, want 3200", len(seen))
	}
	// rueidis sends CLIENT CACHING YES, MULTI, PTTL, GET, EXEC: seqd
	// refuses CACHING, MULTI and EXEC, and rueidis reports the read
	// aborted.
	if v, err := c.DoCache(ctx, c.B().Get().Key("55").Cache(), time.Minute).AsInt64(); err == nil {
		t.Fatalf("DoCache GET = %d, want an error (no client-side caching)", v)
	}
	if got, err := c.Do(ctx, c.B().Incr().Key("55").Build()).AsInt64(); err != nil || got <= b {
		t.Fatalf("INCR 55 after the refused DoCache = %d, %v", got, err)
	}
}

// TestRedisPy drives seqd with redis-py (Debian's python3-redis).
func TestRedisPy(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-py not installed (CI installs python3-redis): %v", err)
		}
		t.Skip("redis-py not installed (apt-get install python3-redis)")
	}
	_, addrs := redisCluster(t, 3)
	host, port, _ := strings.Cut(addrs[0], ":")
	script := `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))
assert r.ping()
a = r.incr("31")
b = r.incr("31")
assert b == a + 1, (a, b)
c = r.incrby("31", 7)
assert c == b + 7, (b, c)
assert int(r.get("31")) == c
p = r.pipeline(transaction=False)
for _ in range(50):
    p.incr("32")
vals = p.execute()
assert vals == sorted(vals) and len(set(vals)) == 50, vals
assert r.mget(["31", "32"]) == [str(c).encode(), str(vals[-1]).encode()]
try:
    r.set("a", "b")
    raise SystemExit("SET accepted")
except redis.exceptions.ResponseError as e:
    assert "unknown command 'SET'" in str(e), e
print("redis-py ok", c, vals[-1])
`
	out, err := exec.Command(py, "-c", script, host, port).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "redis-py ok") {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
}

// TestRueidisINCRUnderLeaderKills runs INCR, INCRBY and GET through
// rueidis (one client per server, default options) from 16 callers while
// servers leading groups are killed with SIGKILL and restarted, four
// times, and checks the whole history: no value twice, per-key order, and
// reads at least every value taken before them (C1-C3).
func TestRueidisINCRUnderLeaderKills(t *testing.T) {
	ps, addrs := redisCluster(t, 3)
	var clients []rueidis.Client
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var keys []uint64
	for _, k := range keysPerGroup(3) {
		keys = append(keys, k, k+1)
	}
	rec := history.NewRecorder()
	ctx, stop := context.WithCancel(context.Background())
	var oks, fails atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				c := clients[rng.IntN(len(clients))]
				k := keys[rng.IntN(len(keys))]
				ks := strconv.FormatUint(k, 10)
				op := history.Op{Key: k, Client: fmt.Sprintf("w%d", w)}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				op.Start = rec.Now()
				var v int64
				var err error
				switch r := rng.IntN(10); {
				case r < 8:
					v, err = c.Do(cctx, c.B().Incr().Key(ks).Build()).AsInt64()
					op.First, op.Last = uint64(v), uint64(v)
				case r == 8:
					v, err = c.Do(cctx, c.B().Incrby().Key(ks).Increment(3).Build()).AsInt64()
					op.First, op.Last = uint64(v-2), uint64(v)
				default:
					v, err = c.Do(cctx, c.B().Get().Key(ks).Build()).AsInt64()
					op.Kind, op.First, op.Last = history.Read, uint64(v), uint64(v)
				}
				op.End = rec.Now()
				cancel()
				if failed(t, ctx, &fails, op, err) {
					continue
				}
				oks.Add(1)
				rec.Add(op)
			}
		})
	}
	for round := range 4 {
		time.Sleep(1500 * time.Millisecond)
		victim := leaderOfSomeGroup(t, ps, addrs)
		before := oks.Load()
		victim.Kill9()
		t.Logf("round %d: killed %s (%d ops so far)", round, victim.ID, before)
		time.Sleep(1500 * time.Millisecond)
		victim.Start(t)
	}
	time.Sleep(3 * time.Second)
	stop()
	wg.Wait()
	checkHistory(t, rec, oks.Load(), fails.Load())
}

// checkHistory fails the test on an anomaly of rec's history (a value
// twice, a value not above one taken by a call that ended before, a read
// below a value taken before it began) or on fewer than 1000 successful
// operations.
func checkHistory(t *testing.T, rec *history.Recorder, oks, fails int64) {
	t.Helper()
	ops := rec.Ops()
	if an := history.Check(ops, 10); len(an) > 0 {
		for _, a := range an {
			t.Errorf("%s: %v", a, a.Ops)
		}
		t.Fatalf("%d anomalies in %d operations", len(an), len(ops))
	}
	if oks < 1000 {
		t.Fatalf("only %d operations succeeded (%d failed)", oks, fails)
	}
	t.Logf("%d operations, %d failed (TRYAGAIN, a timeout or a stopped server's connection), no anomaly", oks, fails)
}

// failed counts a failed call (err != nil) of a load's caller, fails the
// test if the error is not one a fault may cause (isExpected) while the
// load runs (ctx), and pauses the caller briefly; it reports whether the
// call failed.
func failed(t *testing.T, ctx context.Context, fails *atomic.Int64, op history.Op, err error) bool {
	if err == nil {
		return false
	}
	fails.Add(1)
	if ctx.Err() == nil && !isExpected(err) {
		t.Errorf("%s %d: unexpected error %v", op.Client, op.Key, err)
	}
	time.Sleep(5 * time.Millisecond)
	return true
}

// isExpected reports whether err is what a kill may cause: a TRYAGAIN (no
// serving leader for the key's group within the server's retries), a
// connection error, or a timeout.
func isExpected(err error) bool {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return re.IsTryAgain() || strings.HasPrefix(re.Error(), "TRYAGAIN")
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "closed") ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "reset")
}

// leaderOfSomeGroup returns a process that leads at least one group, as
// the Redis front end's INFO reports it (seqd_leads_groups).
func leaderOfSomeGroup(t *testing.T, ps []*proctest.Proc, addrs []string) *proctest.Proc {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialTimeout: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := c.Info(ctx, "seqd").Result()
			cancel()
			c.Close()
			if err == nil && !strings.Contains(info, "seqd_leads_groups:\r\n") {
				return ps[i]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no server leads a group")
	return nil
}
