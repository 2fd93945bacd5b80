package groupstest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// rawAnswer is one raw Connect JSON answer.
type rawAnswer struct {
	status int
	hdr    http.Header
	values []uint64
	code   string
}

// rawCall posts body to procedure of the node at addr as Connect JSON with
// the given request headers, as a hand-made client would.
func rawCall(t *testing.T, addr, procedure, body string, hdr map[string]string) rawAnswer {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/seq.v1.SequenceService/"+procedure, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := rawAnswer{status: resp.StatusCode, hdr: resp.Header}
	var m struct {
		Values []string `json:"values"`
		Code   string   `json:"code"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %q: %v", procedure, b, err)
	}
	out.code = m.Code
	for _, v := range m.Values {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out.values = append(out.values, n)
	}
	return out
}

func keysJSON(keys []uint64) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = strconv.FormatUint(k, 10)
	}
	return `{"keys":[` + strings.Join(s, ",") + `]}`
}

// TestGroupsHandMadeCallsNeverRepeat (adversarial review of routing): hand
// made Connect JSON calls to every node, with forged Seqd-Group and
// Seqd-Forwarded request headers, keys of every group with duplicates,
// single-group keys sent to other groups' leaders; then a multi-group call
// while one group's leader is cut off its group's raft traffic, through
// the Go client with coalescing and a short RetryFor. Every answer must be
// whole (all values, or an error), values per key strictly increase over
// calls that did not overlap, Current stays at or above every value
// returned and below the next Next, and an answer's Seqd-Group names the
// group the servers place the keys in, whatever the request said.
func TestGroupsHandMadeCallsNeverRepeat(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(30 * time.Second)
	leaders := c.GroupLeaders()
	keys := keysPerGroup(groups)
	last := map[uint64]uint64{}
	check := func(what string, ks, vals []uint64) {
		t.Helper()
		if len(vals) != len(ks) {
			t.Fatalf("%s: %d values for %d keys", what, len(vals), len(ks))
		}
		for i, k := range ks {
			if vals[i] <= last[k] {
				t.Fatalf("%s: key %d got %d after %d", what, k, vals[i], last[k])
			}
			last[k] = vals[i]
		}
	}
	mixed := []uint64{keys[0], keys[1], keys[2], keys[0], keys[1], keys[2] + 1, keys[0]}

	for _, m := range c.Nodes {
		a := rawCall(t, m.APIAddr, "Next", keysJSON(mixed), map[string]string{seqd.HeaderGroup: "2 999999"})
		if a.status != 200 {
			t.Fatalf("%s: mixed Next: %d %s", m.ID, a.status, a.code)
		}
		check(m.ID+" mixed", mixed, a.values)
		if g := a.hdr.Get(seqd.HeaderGroup); g != "" {
			t.Fatalf("%s: an answer of several groups carries Seqd-Group %q", m.ID, g)
		}
		for g, k := range keys {
			a := rawCall(t, m.APIAddr, "Next", keysJSON([]uint64{k}), map[string]string{seqd.HeaderGroup: fmt.Sprintf("%d 999999", (g+1)%groups)})
			if a.status != 200 {
				t.Fatalf("%s: Next of group %d: %d %s", m.ID, g, a.status, a.code)
			}
			check(m.ID+" single", []uint64{k}, a.values)
			gs, _, _ := strings.Cut(a.hdr.Get(seqd.HeaderGroup), " ")
			if gs != strconv.Itoa(g) {
				t.Fatalf("%s: key of group %d answered with Seqd-Group %q", m.ID, g, a.hdr.Get(seqd.HeaderGroup))
			}
			if leaders[g] != m && a.hdr.Get(seqd.HeaderLeader) != leaders[g].APIAddr {
				t.Fatalf("%s: forwarded key of group %d: Seqd-Leader %q, leader %s", m.ID, g, a.hdr.Get(seqd.HeaderLeader), leaders[g].APIAddr)
			}
		}
		// A forged forwarded header: a node serves only the groups it
		// leads, and a call spanning others fails whole.
		f := rawCall(t, m.APIAddr, "Next", keysJSON(mixed), map[string]string{seqd.HeaderForwarded: "n-forged"})
		if f.status == 200 {
			t.Fatalf("%s: a forged forwarded call over every group succeeded: %v", m.ID, f.values)
		}
		if f.code != "unavailable" || len(f.values) != 0 {
			t.Fatalf("%s: forged forwarded call: %d %s %v", m.ID, f.status, f.code, f.values)
		}
		for g, k := range keys {
			f := rawCall(t, m.APIAddr, "Next", keysJSON([]uint64{k}), map[string]string{seqd.HeaderForwarded: "n-forged"})
			if (f.status == 200) != (leaders[g] == m) {
				t.Fatalf("%s: forged forwarded call of group %d (led by %s): %d %s", m.ID, g, leaders[g].ID, f.status, f.code)
			}
			if f.status == 200 {
				check(m.ID+" forged forwarded", []uint64{k}, f.values)
			}
		}
		// Current: at least every value returned, below the next Next.
		cur := rawCall(t, m.APIAddr, "Current", keysJSON(keys), nil)
		if cur.status != 200 {
			t.Fatalf("%s: Current: %d %s", m.ID, cur.status, cur.code)
		}
		for i, k := range keys {
			if cur.values[i] < last[k] {
				t.Fatalf("%s: Current of key %d is %d, below %d returned", m.ID, k, cur.values[i], last[k])
			}
			last[k] = max(last[k], cur.values[i]) // the next Next must pass it
		}
	}

	// One group cut off mid-call: coalesced multi-group calls through the Go
	// client with a short RetryFor, some failing. Every success is whole and
	// ordered after the calls that completed before it began.
	cl, err := client.New(c.APIAddrs(), client.Options{RetryFor: 300 * time.Millisecond, AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type op struct {
		start, end time.Time
		keys, vals []uint64
		cur        bool
	}
	var (
		mu  sync.Mutex
		ops []op
	)
	floor := map[uint64]uint64{}
	for k, v := range last {
		floor[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failed, succeeded int
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				ks := slices.Clone(mixed[:3+(w+i)%5])
				start := time.Now()
				var vals []uint64
				var err error
				cur := (w+i)%4 == 3
				if cur {
					vals, err = cl.Current(context.Background(), "", ks...)
				} else {
					vals, err = cl.Next(context.Background(), "", ks...)
				}
				end := time.Now()
				mu.Lock()
				if err != nil {
					failed++
				} else {
					succeeded++
					if len(vals) != len(ks) || slices.Contains(vals, 0) {
						mu.Unlock()
						t.Errorf("a call answered %v for keys %v", vals, ks)
						return
					}
					ops = append(ops, op{start, end, ks, vals, cur})
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	const cut = 1
	old := leaders[cut].Node()
	old.CutGroupTraffic(cut, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := c.GroupLeaders()[cut]; m != nil && m != leaders[cut] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader for the cut group")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	old.CutGroupTraffic(cut, false)
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	t.Logf("%d calls succeeded, %d failed", succeeded, failed)

	// Per key: Next values unique; a call that completed before another
	// began has the lower value (Next) or a value the later Next passes
	// (Current), and a Current is at least every Next completed before it.
	seen := map[uint64]map[uint64]bool{}
	type point struct {
		start, end time.Time
		v          uint64
		cur        bool
	}
	byKey := map[uint64][]point{}
	for _, o := range ops {
		for i, k := range o.keys {
			if !o.cur {
				if seen[k] == nil {
					seen[k] = map[uint64]bool{}
				}
				if seen[k][o.vals[i]] {
					t.Fatalf("key %d: value %d returned twice", k, o.vals[i])
				}
				seen[k][o.vals[i]] = true
				if o.vals[i] <= floor[k] {
					t.Fatalf("key %d: %d at or below %d from before", k, o.vals[i], floor[k])
				}
			}
			byKey[k] = append(byKey[k], point{o.start, o.end, o.vals[i], o.cur})
		}
	}
	for k, ps := range byKey {
		// The largest Next value returned by calls that ended before t.
		for _, b := range ps {
			for _, a := range ps {
				if !a.end.Before(b.start) {
					continue
				}
				switch {
				case !a.cur && !b.cur && b.v <= a.v:
					t.Fatalf("key %d: Next got %d after a Next that returned %d had completed", k, b.v, a.v)
				case !a.cur && b.cur && b.v < a.v:
					t.Fatalf("key %d: Current got %d after a Next that returned %d had completed", k, b.v, a.v)
				case a.cur && !b.cur && b.v <= a.v:
					t.Fatalf("key %d: Next got %d after a Current that returned %d had completed", k, b.v, a.v)
				}
			}
		}
	}
}
