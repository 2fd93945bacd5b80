package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestBrowserSeesEverySeqdHeader calls Next on a real leader through the CORS
// layer as a browser on another origin would (preflight, then a Connect JSON
// POST): every seqd.ExposedHeaders entry is exposed, and so is every Seqd-*
// header the answer actually carries (a header missing from
// seqd.ExposedHeaders would be hidden from browser code).
func TestBrowserSeesEverySeqdHeader(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	const origin = "http://page.example"
	srv := httptest.NewServer(api.CORS([]string{origin}, api.New(leader.Node(), nil).Handler()))
	defer srv.Close()
	url := srv.URL + seqv1connect.SequenceServiceNextProcedure

	pre, _ := http.NewRequest(http.MethodOptions, url, nil)
	pre.Header.Set("Origin", origin)
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "content-type,connect-protocol-version")
	res, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}

	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"keys":["1"]}`))
	req.Header.Set("Origin", origin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("Next: HTTP %d %v", res.StatusCode, res.Header)
	}
	expose := res.Header.Get("Access-Control-Expose-Headers")
	exposed := map[string]bool{}
	for _, name := range strings.Split(expose, ",") {
		exposed[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
	}
	for _, name := range seqd.ExposedHeaders {
		if !exposed[http.CanonicalHeaderKey(name)] {
			t.Errorf("seqd.ExposedHeaders entry %s not exposed: %q", name, expose)
		}
	}
	seen := 0
	for name := range res.Header {
		if strings.HasPrefix(name, "Seqd-") {
			seen++
			if !exposed[name] {
				t.Errorf("the answer carries %s but does not expose it: %q", name, expose)
			}
		}
	}
	if seen < 2 || res.Header.Get(seqd.HeaderServedBy) != leader.ID {
		t.Errorf("a leader's answer lacks Seqd-Served-By/Seqd-Routing-Version: %v", res.Header)
	}
}
