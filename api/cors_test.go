package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seqd/seqd"
)

func TestCORS(t *testing.T) {
	var hits int
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("Seqd-Routing-Version", "1")
		w.WriteHeader(200)
	})
	do := func(h http.Handler, method, origin string, hdr map[string]string) *http.Response {
		r := httptest.NewRequest(method, "/seq.v1.SequenceService/Next", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	pre := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-grpc-web,x-user-agent"}

	h := CORS([]string{"http://app.example:8080"}, next)
	res := do(h, "OPTIONS", "http://app.example:8080", pre)
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != "http://app.example:8080" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "X-Grpc-Web") ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "Connect-Protocol-Version") ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Methods"), "POST") || hits != 0 {
		t.Errorf("allowed preflight: %d %v (hits %d)", res.StatusCode, res.Header, hits)
	}
	res = do(h, "POST", "http://app.example:8080", nil)
	if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "http://app.example:8080" ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status-Details-Bin") ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Seqd-Leader-Id") || hits != 1 {
		t.Errorf("allowed request: %d %v", res.StatusCode, res.Header)
	}
	res = do(h, "OPTIONS", "http://evil.example", pre)
	if res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("foreign preflight: %d %v", res.StatusCode, res.Header)
	}
	res = do(h, "POST", "http://evil.example", nil)
	if res.Header.Get("Access-Control-Allow-Origin") != "" || hits != 2 {
		t.Errorf("foreign request got CORS headers: %v", res.Header)
	}
	res = do(h, "POST", "", nil)
	if res.Header.Get("Access-Control-Allow-Origin") != "" || hits != 3 {
		t.Errorf("request without Origin got CORS headers: %v", res.Header)
	}

	star := CORS([]string{"*"}, next)
	res = do(star, "OPTIONS", "https://anything.example", pre)
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != "https://anything.example" {
		t.Errorf("* preflight: %d %v", res.StatusCode, res.Header)
	}
	if CORS(nil, next) == nil {
		t.Error("CORS(nil) returned nil")
	}
	if res := do(CORS([]string{""}, next), "POST", "http://a.example", nil); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no origins configured, got CORS headers: %v", res.Header)
	}
}

// TestCORSExposesEverySeqdHeader: an allowed cross-origin answer exposes
// every header of seqd.ExposedHeaders and gRPC-Web's status trailers, and a
// preflight from that origin is allowed.
func TestCORSExposesEverySeqdHeader(t *testing.T) {
	h := CORS([]string{"http://app.example"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	pre := httptest.NewRequest(http.MethodOptions, "/seq.v1.SequenceService/Next", nil)
	pre.Header.Set("Origin", "http://app.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "content-type,connect-protocol-version,authorization")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, pre)
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "http://app.example" {
		t.Fatalf("preflight: %d %v", w.Code, w.Header())
	}

	req := httptest.NewRequest(http.MethodPost, "/seq.v1.SequenceService/Next", nil)
	req.Header.Set("Origin", "http://app.example")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	exposed := map[string]bool{}
	for _, name := range strings.Split(w.Header().Get("Access-Control-Expose-Headers"), ",") {
		exposed[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
	}
	want := append([]string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"}, seqd.ExposedHeaders...)
	for _, name := range want {
		if !exposed[http.CanonicalHeaderKey(name)] {
			t.Errorf("%s is not exposed: Access-Control-Expose-Headers %q", name, w.Header().Get("Access-Control-Expose-Headers"))
		}
	}
}
