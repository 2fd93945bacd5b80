package api_test

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/internal/testcluster"
)

// leafGet GETs path on addr and returns the status, Content-Type and body.
func leafGet(t *testing.T, addr, path, token string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// leafGetRetry is leafGet repeated while the answer is 503 (a group without
// a serving leader for longer than the server retries, as on a loaded
// machine), for up to 30 s, as a client does; retried says whether it did
// (a retried GET may leave a gap).
func leafGetRetry(t *testing.T, addr, path string) (status int, ctype, body string, retried bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, ctype, body = leafGet(t, addr, path, "")
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return status, ctype, body, retried
		}
		retried = true
	}
}

func waitGroups(t *testing.T, c *testcluster.Cluster, groups int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ls := c.GroupLeaders(); len(ls) == groups && !slices.Contains(ls, nil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no serving leader for every group")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeafSegment: GET /api/segment/get/{tag} answers the next value of
// key 0 of the tag's space as plain text from any server, concurrent GETs
// never get one value twice, upper-case tags reach their mapped space, and
// errors carry their code's HTTP status and one line of text.
func TestLeafSegment(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 3, LeaseHandoff: true})
	waitGroups(t, c, 3)
	for _, name := range []string{"orders", "mytag..0.2"} {
		c.CreateSpace(seqd.Space{Name: name, Step: 1000, SectionSize: 1000})
	}
	var last uint64
	for i := range 6 {
		m := c.Nodes[i%3]
		status, ctype, body, _ := leafGetRetry(t, m.APIAddr, "/api/segment/get/orders")
		v, err := strconv.ParseUint(body, 10, 64)
		if status != http.StatusOK || ctype != "text/plain; charset=utf-8" || err != nil || v <= last {
			t.Fatalf("%s: GET orders = %d %q %q after %d", m.ID, status, ctype, body, last)
		}
		last = v
	}
	_, _, body, r1 := leafGetRetry(t, c.Nodes[1].APIAddr, "/api/segment/get/MyTag")
	a, _ := strconv.ParseUint(body, 10, 64)
	if a != 1 && !(r1 && a > 1) {
		t.Fatalf("GET MyTag = %q, want 1", body)
	}
	_, _, body, r2 := leafGetRetry(t, c.Nodes[2].APIAddr, "/api/segment/get/MyTag")
	if b, _ := strconv.ParseUint(body, 10, 64); b != a+1 && !(r2 && b > a) {
		t.Fatalf("GET MyTag again = %q, want %d", body, a+1)
	}

	// Concurrent GETs on every server: every value once.
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := range 24 {
		wg.Go(func() {
			for range 20 {
				status, _, body, _ := leafGetRetry(t, c.Nodes[w%3].APIAddr, "/api/segment/get/orders")
				if status != http.StatusOK {
					t.Errorf("GET orders: %d %q", status, body)
					return
				}
				mu.Lock()
				if seen[body] {
					t.Errorf("value %s twice", body)
				}
				seen[body] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 24*20 {
		t.Fatalf("%d values, want %d", len(seen), 24*20)
	}

	for _, tc := range []struct {
		path   string
		status int
		text   string
	}{
		{"/api/segment/get/nosuch", 404, `not_found: tag "nosuch" is space "nosuch", which does not exist: create it with seqd space create nosuch`},
		{"/api/segment/get/NoSuch", 404, `space "nosuch..0.2"`},
		{"/api/segment/get/a..b", 400, `invalid_argument: tag "a..b"`},
		{"/api/segment/get/_x", 400, `invalid_argument: tag "_x"`},
		{"/api/segment/get/" + strings.Repeat("A", 40), 400, "longer than 64 characters"},
	} {
		status, ctype, body := leafGet(t, c.Nodes[0].APIAddr, tc.path, "")
		if status != tc.status || ctype != "text/plain; charset=utf-8" || !strings.Contains(body, tc.text) ||
			strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
			t.Errorf("GET %s = %d %q %q, want %d and a line with %q", tc.path, status, ctype, body, tc.status, tc.text)
		}
	}
	// Only GET.
	resp, err := http.Post("http://"+c.Nodes[0].APIAddr+"/api/segment/get/orders", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST = %d, want 405", resp.StatusCode)
	}
}

// TestLeafSnowflake: GET /api/snowflake/get/{key} answers a flake id of the
// key's namespace, or of "default" when there is none (Leaf ignores the
// key); ids increase on one server and never repeat. A 503 (leadership lost
// on a loaded machine) is retried as a client does: availability is not
// what this checks, and a retried GET still may not repeat or go back.
func TestLeafSnowflake(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	seen := map[string]bool{}
	var last int64
	for i := range 30 {
		status, ctype, body, _ := leafGetRetry(t, c.Nodes[0].APIAddr, "/api/snowflake/get/anything")
		id, err := strconv.ParseInt(body, 10, 64)
		if status != http.StatusOK || ctype != "text/plain; charset=utf-8" || err != nil || id <= last || seen[body] {
			t.Fatalf("GET %d: %d %q %q after %d", i, status, ctype, body, last)
		}
		seen[body], last = true, id
	}
	if status, _, body := leafGet(t, c.Nodes[1].APIAddr, "/api/snowflake/get/a:b", ""); status != 400 || !strings.HasPrefix(body, "invalid_argument") {
		t.Fatalf("GET a:b = %d %q", status, body)
	}
}

// TestLeafToken: with --token-sequence, the Leaf paths need the bearer
// token (401 without it).
func TestLeafToken(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{Token: "s3cret", TokenSequence: true})
	c.WaitServingLeader(20 * time.Second)
	addr := c.Nodes[0].APIAddr
	for _, path := range []string{"/api/segment/get/default", "/api/snowflake/get/x"} {
		if status, _, body := leafGet(t, addr, path, ""); status != 401 || !strings.HasPrefix(body, "unauthenticated") {
			t.Fatalf("GET %s without a token = %d %q", path, status, body)
		}
		if status, _, body := leafGet(t, addr, path, "s3cret"); status != 200 {
			t.Fatalf("GET %s with the token = %d %q", path, status, body)
		}
	}
}

// TestLeafNoQuorum: without a quorum, a segment GET answers 503 with
// Retry-After and the reason, after the server's retries.
func TestLeafNoQuorum(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	surv := c.Nodes[2]
	// The survivor must know the default space before the others die (it
	// cannot ask them afterwards).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := surv.Node().Space(seqd.DefaultSpaceName); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the default space never reached the survivor")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, _, body, _ := leafGetRetry(t, surv.APIAddr, "/api/segment/get/default"); status != 200 {
		t.Fatalf("GET = %d %q", status, body)
	}
	c.Nodes[0].Kill()
	c.Nodes[1].Kill()
	// The survivor may answer while a lease lasts: until the first 503.
	var resp *http.Response
	var b []byte
	deadline = time.Now().Add(30 * time.Second)
	for {
		var err error
		if resp, err = http.Get("http://" + surv.APIAddr + "/api/segment/get/default"); err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || time.Now().After(deadline) {
			break
		}
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.HasPrefix(string(b), "unavailable: ") {
		t.Fatalf("GET without a quorum = %d %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}
