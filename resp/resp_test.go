package resp_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/internal/testcluster"
	"github.com/seqd/seqd/resp"
)

// conn is a raw RESP connection: commands written as arrays of bulk
// strings, replies read back as Go values (string for simple and bulk
// strings, int64, []any, map[string]any, nil, respErr).
type conn struct {
	t  testing.TB
	c  net.Conn
	rd *bufio.Reader
	// wait bounds the wait for one reply (default 20 s).
	wait time.Duration
	// retried is set once must retried a TRYAGAIN.
	retried bool
}

type respErr string

func dial(t testing.TB, addr string) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{t: t, c: c, rd: bufio.NewReader(c)}
}

func (c *conn) send(args ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		c.t.Fatal(err)
	}
}

func (c *conn) do(args ...string) any {
	c.t.Helper()
	c.send(args...)
	return c.read()
}

// must is do, repeated while the reply is TRYAGAIN (a group without a
// serving leader for longer than the front end retries, as on a loaded
// machine), for up to 30 s, as a client does; it notes that it retried,
// since a retried INCR may leave a gap.
func (c *conn) must(args ...string) any {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := c.do(args...)
		if e, ok := got.(respErr); !ok || !strings.HasPrefix(string(e), "TRYAGAIN ") || time.Now().After(deadline) {
			return got
		}
		c.retried = true
	}
}

// exactly reports whether v is want, or, after a retry (a gap allowed), at
// least want.
func (c *conn) exactly(v, want uint64) bool {
	return v == want || (c.retried && v > want)
}

func (c *conn) read() any {
	c.t.Helper()
	wait := c.wait
	if wait == 0 {
		wait = 20 * time.Second
	}
	_ = c.c.SetReadDeadline(time.Now().Add(wait))
	v, err := readReply(c.rd)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	return v
}

func readReply(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respErr(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '_':
		return nil, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*', '%':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		if line[0] == '%' {
			n *= 2
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(rd); err != nil {
				return nil, err
			}
		}
		if line[0] == '%' {
			m := map[string]any{}
			for i := 0; i < n; i += 2 {
				m[fmt.Sprint(out[i])] = out[i+1]
			}
			return m, nil
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

func asInt(t testing.TB, v any) uint64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return uint64(x)
	case string:
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			t.Fatalf("reply %q is not a number", x)
		}
		return n
	}
	t.Fatalf("reply %#v is not a number", v)
	return 0
}

func startCluster(t *testing.T, nodes, groups int) *testcluster.Cluster {
	t.Helper()
	c := testcluster.Start(t, nodes, testcluster.Options{Groups: groups, Redis: true, LeaseHandoff: true})
	// Every group serving: an INCR of a key of each group answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ls := c.GroupLeaders(); len(ls) == groups && !slices.Contains(ls, nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no serving leader for every group")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every server knows the default space (a test may kill the others).
	for _, m := range c.Nodes {
		for {
			if _, ok := m.Node().Space(seqd.DefaultSpaceName); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never learned the default space", m.ID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return c
}

// TestRESPCommands runs every supported command, and refusals, against
// every server of a 3-group cluster: any server answers every key.
func TestRESPCommands(t *testing.T) {
	c := startCluster(t, 3, 3)
	keys := testcluster.KeyPerGroup(3)
	var last [3]uint64
	for _, m := range c.Nodes {
		rc := dial(t, m.RedisAddr)
		for g, k := range keys {
			v := asInt(t, rc.must("INCR", strconv.FormatUint(k, 10)))
			if v <= last[g] {
				t.Fatalf("%s: INCR %d = %d after %d", m.ID, k, v, last[g])
			}
			last[g] = v
			// At least the value taken (C3); more only after a failover
			// in between, when a new leader starts a section higher.
			got := asInt(t, rc.must("GET", "default:"+strconv.FormatUint(k, 10)))
			if got < v {
				t.Fatalf("%s: GET %d = %d after INCR gave %d", m.ID, k, got, v)
			}
		}
		// INCRBY n answers the last value of the n taken.
		k := strconv.FormatUint(keys[1], 10)
		v := asInt(t, rc.must("INCRBY", k, "10"))
		if v < last[1]+10 {
			t.Fatalf("INCRBY 10 = %d after %d", v, last[1])
		}
		last[1] = v
		if n := asInt(t, rc.must("INCR", k)); !rc.exactly(n, v+1) {
			t.Fatalf("INCR after INCRBY = %d, want %d", n, v+1)
		}
		last[1] = v + 1
		if rc.retried {
			last[1] = asInt(t, rc.must("GET", k))
		}
		// 987654321: a key of a section nobody took from (a key of a
		// section others took from answers the section's floor after a
		// failover).
		mget, ok := rc.must("MGET", strconv.FormatUint(keys[0], 10), strconv.FormatUint(keys[2], 10), "987654321").([]any)
		if !ok || len(mget) != 3 || asInt(t, mget[0]) < last[0] || asInt(t, mget[1]) < last[2] || mget[2] != "0" {
			t.Fatalf("MGET = %#v, want %d %d 0", mget, last[0], last[2])
		}
	}

	rc := dial(t, c.Nodes[0].RedisAddr)
	for _, tc := range []struct {
		args []string
		want any // a string, or a respErr prefix
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"ping", "hi"}, "hi"},
		{[]string{"ECHO", "x y"}, "x y"},
		{[]string{"SELECT", "0"}, "OK"},
		{[]string{"SELECT", "1"}, respErr("ERR DB index is out of range")},
		{[]string{"CLIENT", "SETNAME", "me"}, "OK"},
		{[]string{"CLIENT", "GETNAME"}, "me"},
		{[]string{"CLIENT", "SETINFO", "LIB-NAME", "x"}, "OK"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "OK"},
		{[]string{"CLIENT", "CACHING", "YES"}, respErr("ERR CLIENT CACHING is not supported")},
		{[]string{"SET", "a", "b"}, respErr("ERR unknown command 'SET': seqd speaks INCR, INCRBY, GET, MGET")},
		{[]string{"DECR", "1"}, respErr("ERR unknown command 'DECR'")},
		{[]string{"CLUSTER", "SLOTS"}, respErr("ERR This instance has cluster support disabled")},
		{[]string{"INCR", "abc"}, respErr("ERR key 'abc' is not [space:]N")},
		{[]string{"INCR", "-1"}, respErr("ERR key '-1' is not [space:]N")},
		{[]string{"INCR", "+1"}, respErr("ERR key '+1' is not [space:]N")},
		{[]string{"INCR", "18446744073709551616"}, respErr("ERR key '18446744073709551616' is not")},
		{[]string{"INCR", "a b:1"}, respErr("ERR key 'a b:1': the part before the last ':' names the space")},
		{[]string{"INCR", ":1"}, respErr("ERR key ':1': the part before the last ':' names the space")},
		{[]string{"INCR", "nosuch:1"}, respErr(`ERR unknown space "nosuch"`)},
		{[]string{"GET", "NoSuch:1"}, respErr(`ERR unknown space "nosuch..0.2"`)},
		{[]string{"INCR"}, respErr("ERR wrong number of arguments for 'incr' command")},
		{[]string{"INCR", "1", "2"}, respErr("ERR wrong number of arguments for 'incr' command")},
		{[]string{"INCRBY", "1", "0"}, respErr("ERR INCRBY takes an increment from 1 to 1000000")},
		{[]string{"INCRBY", "1", "-5"}, respErr("ERR INCRBY takes an increment from 1 to 1000000")},
		{[]string{"INCRBY", "1", "1000001"}, respErr("ERR INCRBY takes an increment from 1 to 1000000")},
		{[]string{"INCRBY", "1", "x"}, respErr("ERR INCRBY takes an increment")},
		{[]string{"MGET"}, respErr("ERR wrong number of arguments for 'mget' command")},
		{[]string{"AUTH", "x"}, respErr("ERR AUTH <password> called without any password configured")},
		{[]string{"HELLO", "4"}, respErr("NOPROTO")},
		{[]string{"COMMAND", "COUNT"}, int64(13)},
	} {
		got := rc.do(tc.args...)
		if w, ok := tc.want.(respErr); ok {
			if e, ok := got.(respErr); !ok || !strings.HasPrefix(string(e), string(w)) {
				t.Errorf("%q = %#v, want an error starting %q", tc.args, got, w)
			}
		} else if got != tc.want {
			t.Errorf("%q = %#v, want %#v", tc.args, got, tc.want)
		}
	}
	// HELLO 3 answers a map and switches to RESP3; HELLO 2 an array.
	h3, ok := rc.do("HELLO", "3").(map[string]any)
	if !ok || h3["proto"] != int64(3) || h3["version"] != "7.0.0" || h3["role"] != "master" {
		t.Fatalf("HELLO 3 = %#v", h3)
	}
	if got := rc.do("CLIENT", "GETNAME"); got != "me" {
		t.Fatalf("CLIENT GETNAME after HELLO 3 = %#v", got)
	}
	if h2, ok := rc.do("HELLO", "2").([]any); !ok || len(h2) != 16 || h2[5] != int64(2) {
		t.Fatalf("HELLO 2 = %#v", h2)
	}
	info, _ := rc.do("INFO").(string)
	for _, want := range []string{"redis_version:7.0.0", "role:master", "seqd_node_id:n1", "seqd_groups:3", "seqd_cluster_id:" + c.Nodes[0].Node().ClusterID()} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if got, _ := rc.do("INFO", "replication").(string); strings.Contains(got, "redis_version") || !strings.Contains(got, "role:master") {
		t.Errorf("INFO replication = %q", got)
	}
	cmds, ok := rc.do("COMMAND").([]any)
	if !ok || len(cmds) != 13 {
		t.Fatalf("COMMAND = %#v", cmds)
	}
	if got := rc.do("QUIT"); got != "OK" {
		t.Fatalf("QUIT = %#v", got)
	}
	if _, err := rc.rd.ReadByte(); err != io.EOF {
		t.Fatalf("after QUIT: %v, want EOF", err)
	}
}

// TestRESPSpaces: keys name their space before the last ':'; a created
// space answers, and an upper-case prefix maps with seqd.ForeignName.
func TestRESPSpaces(t *testing.T) {
	c := startCluster(t, 1, 1)
	for _, name := range []string{"counter", "orders..0"} {
		c.CreateSpace(seqd.Space{Name: name, Step: 100, SectionSize: 1000})
	}
	rc := dial(t, c.Nodes[0].RedisAddr)
	// redis-benchmark's keys: counter:000000012345 is key 12345 of counter.
	if v := asInt(t, rc.must("INCR", "counter:000000012345")); !rc.exactly(v, 1) {
		t.Fatalf("INCR counter:000000012345 = %d", v)
	}
	if v := asInt(t, rc.must("INCR", "counter:12345")); !rc.exactly(v, 2) {
		t.Fatalf("INCR counter:12345 = %d, want 2 (the same key)", v)
	}
	if v := asInt(t, rc.must("INCR", "Orders:12345")); !rc.exactly(v, 1) {
		t.Fatalf("INCR Orders:12345 = %d", v)
	}
	if v := asInt(t, rc.must("GET", "Orders:12345")); !rc.exactly(v, 1) {
		t.Fatalf("GET Orders:12345 = %d", v)
	}
	// A mapped name is not a prefix of its own: "orders..0" is what
	// "Orders" maps to, and ".." is reserved for that.
	if e, ok := rc.do("GET", "orders..0:12345").(respErr); !ok || !strings.Contains(string(e), "reserved") {
		t.Fatalf("GET orders..0:12345 = %#v", e)
	}
	// The last ':' splits: "a:b:1" is space "a:b", which is no name.
	if e, ok := rc.do("INCR", "counter:x:1").(respErr); !ok || !strings.Contains(string(e), "names the space") {
		t.Fatalf("INCR counter:x:1 = %#v", e)
	}
	if v := asInt(t, rc.must("INCR", "12345")); !rc.exactly(v, 1) {
		t.Fatalf("INCR 12345 (default space) = %d", v)
	}
	// A key is one key however it is spelt: pipelined, "777" and
	// "default:777" get increasing values in the order of the commands.
	last := uint64(0)
	for range 100 {
		rc.send("INCR", "777")
		rc.send("INCR", "default:777")
		for _, k := range []string{"777", "default:777"} {
			v := asInt(t, rc.read())
			if v <= last {
				t.Fatalf("INCR %s = %d after %d", k, v, last)
			}
			last = v
		}
	}
}

// TestRESPPipelineOrder pipelines INCRs, GETs and MGETs of a few keys from
// many connections at once: every connection sees its replies in order, a
// key's INCRs on one connection increase, a GET after an INCR is at least
// its value, and no value repeats across connections. A reply may be
// TRYAGAIN (a group's leader lost its lease on a loaded machine, for longer
// than the front end retries): it took no value the test counts.
func TestRESPPipelineOrder(t *testing.T) {
	c := startCluster(t, 3, 3)
	keys := testcluster.KeyPerGroup(3)
	const conns, rounds, depth = 12, 30, 40
	var mu sync.Mutex
	seen := map[string]string{}
	retries := 0
	var wg sync.WaitGroup
	for ci := range conns {
		wg.Go(func() {
			rc := dial(t, c.Nodes[ci%3].RedisAddr)
			// A read's commands run as one run after another (about 24
			// here: the kinds alternate), and a run waits up to the front
			// end's 2 s of retries while a group has no serving leader
			// (a loaded machine lapses leases): the first reply of a round
			// may come after all but one of them.
			rc.wait = 20*time.Second + depth*3*time.Second
			last := map[uint64]uint64{}
			for r := range rounds {
				var sent [][]string
				for d := range depth {
					k := strconv.FormatUint(keys[(ci+d)%3], 10)
					if d%2 == 1 {
						k = "default:" + k // one key, however it is spelt
					}
					var args []string
					switch (r + d) % 5 {
					case 3:
						args = []string{"GET", k}
					case 4:
						args = []string{"MGET", k, strconv.FormatUint(keys[0], 10)}
					default:
						args = []string{"INCR", k}
					}
					rc.send(args...)
					sent = append(sent, args)
				}
				for _, args := range sent {
					got := rc.read()
					k, _ := strconv.ParseUint(strings.TrimPrefix(args[1], "default:"), 10, 64)
					if e, ok := got.(respErr); ok && strings.HasPrefix(string(e), "TRYAGAIN ") {
						mu.Lock()
						retries++
						mu.Unlock()
						continue
					}
					switch args[0] {
					case "INCR":
						v := asInt(t, got)
						if v <= last[k] {
							t.Errorf("conn %d: INCR %d = %d after %d", ci, k, v, last[k])
						}
						last[k] = v
						id := fmt.Sprintf("%d/%d", k, v)
						mu.Lock()
						if other, dup := seen[id]; dup {
							t.Errorf("value %s returned twice (conn %d and %s)", id, ci, other)
						}
						seen[id] = strconv.Itoa(ci)
						mu.Unlock()
					case "GET":
						if v := asInt(t, got); v < last[k] {
							t.Errorf("conn %d: GET %d = %d after INCR gave %d", ci, k, v, last[k])
						}
					case "MGET":
						arr, ok := got.([]any)
						if !ok || len(arr) != 2 || asInt(t, arr[0]) < last[k] {
							t.Errorf("conn %d: MGET %d = %#v after INCR gave %d", ci, k, got, last[k])
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if want := conns * rounds * depth * 3 / 5; len(seen) == 0 || len(seen) < want-retries {
		t.Fatalf("%d INCR values, want %d less %d TRYAGAIN", len(seen), want, retries)
	}
	t.Logf("%d INCR values, %d TRYAGAIN replies", len(seen), retries)
}

// TestRESPLimits: a command larger than the limit (an endless bulk string,
// an endless inline line) is refused with an error and the connection
// closed; a client that never reads its replies is disconnected after the
// write timeout; the server keeps serving others throughout.
func TestRESPLimits(t *testing.T) {
	c := startCluster(t, 1, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := resp.Serve(ln, resp.Config{Backend: c.Nodes[0].Server().Sequences(), MaxCommandBytes: 64 << 10,
		WriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()

	for name, prefix := range map[string]string{
		"bulk":   "*2\r\n$4\r\nECHO\r\n$1000000000\r\n",
		"inline": "ECHO ",
	} {
		rc := dial(t, addr)
		if _, err := rc.c.Write([]byte(prefix)); err != nil {
			t.Fatal(err)
		}
		chunk := []byte(strings.Repeat("x", 4096))
		var werr error
		for i := 0; i < 1000 && werr == nil; i++ { // at most 4 MB
			_, werr = rc.c.Write(chunk)
		}
		got := rc.read()
		if e, ok := got.(respErr); !ok || !strings.Contains(string(e), "larger than 65536 bytes") {
			t.Fatalf("%s: %#v, want the size error", name, got)
		}
		if _, err := rc.rd.ReadByte(); err == nil {
			t.Fatalf("%s: connection still open", name)
		}
		if v := dial(t, addr).do("PING"); v != "PONG" {
			t.Fatalf("after %s: PING = %#v", name, v)
		}
	}

	// Never reading: 200,000 pipelined INCRs (about 2 MB of replies, more
	// than the socket buffers hold) and no read.
	rc := dial(t, addr)
	var b strings.Builder
	for range 2000 {
		b.WriteString("*2\r\n$4\r\nINCR\r\n$1\r\n5\r\n")
	}
	batch := []byte(b.String())
	closed := make(chan error, 1)
	go func() {
		for i := 0; i < 100; i++ {
			_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := rc.c.Write(batch); err != nil {
				closed <- err
				return
			}
		}
		closed <- nil
	}()
	// The server stops reading while its replies wait, so the writer
	// blocks; after the write timeout the server closes, and the writer's
	// write fails (or it finished and the connection is closed).
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never gave up on a client that does not read")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, rc.c); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			break // EOF or reset: closed by the server
		}
		if time.Now().After(deadline) {
			t.Fatal("connection of a client that never read still open")
		}
	}
	if v := dial(t, addr).must("INCR", "5"); asInt(t, v) == 0 {
		t.Fatalf("INCR after = %#v", v)
	}
}

// TestRESPMaxConns: past MaxConns a new connection is told so and closed;
// once one closes, a new one is served.
func TestRESPMaxConns(t *testing.T) {
	c := startCluster(t, 1, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := resp.Serve(ln, resp.Config{Backend: c.Nodes[0].Server().Sequences(), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	a, b := dial(t, srv.Addr().String()), dial(t, srv.Addr().String())
	for _, rc := range []*conn{a, b} {
		if got := rc.do("PING"); got != "PONG" {
			t.Fatalf("PING = %#v", got)
		}
	}
	third := dial(t, srv.Addr().String())
	if e, ok := third.read().(respErr); !ok || e != "ERR max number of clients reached" {
		t.Fatalf("third connection: %#v", e)
	}
	if _, err := third.rd.ReadByte(); err == nil {
		t.Fatal("third connection still open")
	}
	a.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rc := dial(t, srv.Addr().String())
		rc.send("PING")
		if got := rc.read(); got == "PONG" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRESPAuth: with a token, nothing but AUTH, HELLO and QUIT runs before
// AUTH with it (or HELLO 3 AUTH).
func TestRESPAuth(t *testing.T) {
	c := startCluster(t, 1, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := resp.Serve(ln, resp.Config{Backend: c.Nodes[0].Server().Sequences(), Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rc := dial(t, srv.Addr().String())
	for _, args := range [][]string{{"INCR", "1"}, {"GET", "1"}, {"PING"}, {"INCRBY", "1", "2"}, {"HELLO", "3"}} {
		if e, ok := rc.do(args...).(respErr); !ok || !strings.HasPrefix(string(e), "NOAUTH") {
			t.Fatalf("%q before AUTH = %#v", args, e)
		}
	}
	if e, ok := rc.do("AUTH", "wrong").(respErr); !ok || !strings.HasPrefix(string(e), "WRONGPASS") {
		t.Fatalf("AUTH wrong = %#v", e)
	}
	if got := rc.do("AUTH", "default", "s3cret"); got != "OK" {
		t.Fatalf("AUTH = %#v", got)
	}
	if v := asInt(t, rc.must("INCR", "1")); !rc.exactly(v, 1) {
		t.Fatalf("INCR after AUTH = %d", v)
	}
	rc2 := dial(t, srv.Addr().String())
	if e, ok := rc2.do("HELLO", "3", "AUTH", "default", "nope").(respErr); !ok || !strings.HasPrefix(string(e), "WRONGPASS") {
		t.Fatalf("HELLO AUTH wrong = %#v", e)
	}
	if h, ok := rc2.do("HELLO", "3", "AUTH", "default", "s3cret").(map[string]any); !ok || h["proto"] != int64(3) {
		t.Fatalf("HELLO 3 AUTH = %#v", h)
	}
	if v := asInt(t, rc2.must("INCR", "1")); v < 2 {
		t.Fatalf("INCR after HELLO AUTH = %d", v)
	}
}

// TestRESPAuthCluster: seqd serve --token --token-sequence with the Redis
// front end: its clients AUTH with the token, and their calls reach every
// group's leader (the forwards carry the server's token).
func TestRESPAuthCluster(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 3, Redis: true, Token: "s3cret", TokenSequence: true})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ls := c.GroupLeaders(); len(ls) == 3 && !slices.Contains(ls, nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no serving leader for every group")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc := dial(t, c.Nodes[0].RedisAddr)
	if e, ok := rc.do("INCR", "1").(respErr); !ok || !strings.HasPrefix(string(e), "NOAUTH") {
		t.Fatalf("INCR before AUTH = %#v", e)
	}
	if got := rc.do("AUTH", "s3cret"); got != "OK" {
		t.Fatalf("AUTH = %#v", got)
	}
	for _, k := range testcluster.KeyPerGroup(3) {
		v := asInt(t, rc.must("INCR", strconv.FormatUint(k, 10)))
		if !rc.exactly(v, 1) {
			t.Fatalf("INCR %d = %d", k, v)
		}
		if w := asInt(t, rc.must("INCRBY", strconv.FormatUint(k, 10), "2")); !rc.exactly(w, v+2) {
			t.Fatalf("INCRBY %d 2 = %d", k, v)
		}
	}
}

// TestRESPNoQuorum: with two of three servers killed, the survivor answers
// INCR and GET with TRYAGAIN (after retrying for a while), naming why, and
// PING still answers.
func TestRESPNoQuorum(t *testing.T) {
	c := startCluster(t, 3, 1)
	surv := c.Nodes[2]
	rc := dial(t, surv.RedisAddr)
	if v := asInt(t, rc.must("INCR", "9")); !rc.exactly(v, 1) {
		t.Fatalf("INCR 9 = %d", v)
	}
	c.Nodes[0].Kill()
	c.Nodes[1].Kill()
	// A leader among the killed, or the survivor while its lease lasts,
	// may answer a little longer: until the first TRYAGAIN.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := rc.do("INCR", "9")
		if e, ok := got.(respErr); ok && strings.HasPrefix(string(e), "TRYAGAIN ") {
			break
		}
		if _, ok := got.(int64); !ok || time.Now().After(deadline) {
			t.Fatalf("INCR without a quorum = %#v", got)
		}
	}
	for _, args := range [][]string{{"INCR", "9"}, {"GET", "9"}, {"INCRBY", "9", "5"}} {
		start := time.Now()
		got := rc.do(args...)
		e, ok := got.(respErr)
		if !ok || !strings.HasPrefix(string(e), "TRYAGAIN ") || len(e) < len("TRYAGAIN x") {
			t.Fatalf("%q without a quorum = %#v, want TRYAGAIN and why", args, got)
		}
		if took := time.Since(start); took < time.Second || took > 15*time.Second {
			t.Fatalf("%q answered TRYAGAIN after %v, want after the front end's retries (2 s)", args, took)
		}
		t.Logf("%q: %s", args, e)
	}
	if got := rc.do("PING"); got != "PONG" {
		t.Fatalf("PING = %#v", got)
	}
	// A pipeline of two runs that each wait out the retries: the first
	// run's reply is sent as soon as it is known, not with the second's
	// (a client's read timeout, go-redis's 3 s, sees progress).
	rc.send("INCR", "9")
	rc.send("GET", "9")
	start := time.Now()
	rc.read()
	first := time.Since(start)
	rc.read()
	if second := time.Since(start); second-first < time.Second {
		t.Fatalf("the replies of two slow runs came %v and %v after the pipeline: the first waited for the second", first, second)
	}
	// Commands that take longer than the write timeout still get their
	// replies: the timeout bounds the wait for the client to read them,
	// counted from when they are written.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := resp.Serve(ln, resp.Config{Backend: surv.Server().Sequences(), WriteTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	short := dial(t, srv.Addr().String())
	short.send("INCR", "9")
	short.send("PING")
	if e, ok := short.read().(respErr); !ok || !strings.HasPrefix(string(e), "TRYAGAIN ") {
		t.Fatalf("INCR = %#v", e)
	}
	if got := short.read(); got != "PONG" {
		t.Fatalf("PING after a 2 s INCR, write timeout 500 ms: %#v", got)
	}
}

// TestRedisCLI runs Debian's redis-cli against a server: the stock client
// of the issue (CI installs redis-tools).
func TestRedisCLI(t *testing.T) {
	cli := lookTool(t, "redis-cli")
	c := startCluster(t, 3, 3)
	host, port, _ := net.SplitHostPort(c.Nodes[1].RedisAddr)
	// run runs redis-cli once, again while it answers TRYAGAIN (a loaded
	// machine may lapse a lease for longer than the front end retries; a
	// Redis client retries TRYAGAIN, redis-cli does not), for up to 30 s.
	run := func(args ...string) string {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			out, err := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
			}
			got := strings.TrimSpace(string(out))
			if !strings.HasPrefix(got, "TRYAGAIN") || time.Now().After(deadline) {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	num := func(args ...string) int {
		t.Helper()
		got := run(args...)
		n, err := strconv.Atoi(got)
		if err != nil {
			t.Fatalf("redis-cli %q = %q, want a number", args, got)
		}
		return n
	}
	if got := run("PING"); got != "PONG" {
		t.Fatalf("redis-cli PING = %q", got)
	}
	// Values go up; a leader change in between may skip some (a gap), and
	// GET (Current) may then read ahead of the last value, never behind.
	a := num("INCR", "77")
	b := num("INCR", "77")
	if a < 1 || b <= a {
		t.Fatalf("redis-cli INCR 77 twice = %d, %d", a, b)
	}
	if g := num("GET", "77"); g < b {
		t.Fatalf("redis-cli GET 77 = %d, below the last INCR's %d", g, b)
	}
	if got := run("SET", "a", "b"); !strings.Contains(got, "unknown command 'SET'") {
		t.Fatalf("redis-cli SET = %q", got)
	}
	// Commands on standard input, one connection: answered in order (again
	// while one answer is TRYAGAIN, for up to 30 s).
	var lines []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		cmd := exec.Command(cli, "-h", host, "-p", port)
		cmd.Stdin = strings.NewReader("INCR 78\nINCR 78\nGET 78\nINCRBY 78 5\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli <stdin: %v\n%s", err, out)
		}
		lines = strings.Fields(string(out))
		if !strings.Contains(string(out), "TRYAGAIN") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	v := make([]int, len(lines))
	for i, l := range lines {
		v[i], _ = strconv.Atoi(l)
	}
	if len(v) != 4 || v[0] < 1 || v[1] <= v[0] || v[2] < v[1] || v[3] < v[2]+5 {
		t.Fatalf("redis-cli pipeline = %q, want increasing values: INCR, INCR, GET at least the second, INCRBY 5 at least 5 above", lines)
	}
}

// TestRedisBenchmark runs Debian's redis-benchmark -t incr, pipelined 16
// deep on 8 connections, with redis-benchmark's keys (counter:NNNNNNNNNNNN,
// key N of space counter): every INCR answered, and the counter advanced by
// as many.
func TestRedisBenchmark(t *testing.T) {
	bench := lookTool(t, "redis-benchmark")
	c := startCluster(t, 3, 3)
	c.CreateSpace(seqd.Space{Name: "counter", Step: 10000, SectionSize: 100000})
	host, port, _ := net.SplitHostPort(c.Nodes[2].RedisAddr)
	// -r 1: every INCR hits counter:000000000000, so the key's value
	// counts the INCRs.
	out, err := exec.Command(bench, "-h", host, "-p", port, "-t", "incr", "-n", "20000", "-P", "16", "-c", "8", "-r", "1", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "INCR:") || strings.Contains(string(out), "ERR") {
		t.Fatalf("redis-benchmark output:\n%s", out)
	}
	// Each INCR answered a value or, on a loaded machine that lapsed a
	// lease for longer than the front end retries, TRYAGAIN (which
	// redis-benchmark reports as "Error from server").
	rc := dial(t, c.Nodes[0].RedisAddr)
	v := asInt(t, rc.must("GET", "counter:0"))
	if v == 0 || (!strings.Contains(string(out), "Error from server") && v < 20000) {
		t.Fatalf("counter:0 = %d after 20,000 INCRs", v)
	}
	t.Logf("%s", strings.TrimSpace(string(out[strings.LastIndex(string(out), "INCR:"):])))
}

// lookTool finds a stock client; CI must have it, elsewhere the test
// skips without it.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed (CI installs redis-tools)", name)
		}
		t.Skipf("%s not installed (apt-get install redis-tools)", name)
	}
	return p
}
