package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/seqd/seqd"
)

// Request headers Connect and gRPC-Web clients send (browsers add the rest).
var allowedHeaders = []string{
	"Content-Type", "Connect-Protocol-Version", "Connect-Timeout-Ms",
	"Connect-Accept-Encoding", "Connect-Content-Encoding",
	"Grpc-Timeout", "Grpc-Accept-Encoding", "Grpc-Encoding",
	"X-Grpc-Web", "X-User-Agent", "Authorization", seqd.HeaderGeneration,
}

// Response headers and trailers browser code may read: gRPC-Web's status
// trailers, and every seqd header (seqd.ExposedHeaders, the one list, so a
// header added there is exposed here too).
var exposedHeaders = append([]string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"}, seqd.ExposedHeaders...)

// CORS lets browsers on the given origins call next: Connect (unary, JSON or
// binary, POST and GET) and gRPC-Web. An origin is "scheme://host[:port]"
// exactly as browsers send it; "*" allows every origin. No origins: next is
// returned unchanged. Requests without an Origin header (gRPC, curl, other
// servers) pass through untouched; a preflight from an origin not allowed gets
// 403. No cookies are involved, so credentials are never allowed.
func CORS(origins []string, next http.Handler) http.Handler {
	anyOrigin := false
	allowed := make(map[string]bool, len(origins))
	for _, o := range origins {
		o = strings.TrimSpace(o)
		if o == "*" {
			anyOrigin = true
		} else if o != "" {
			allowed[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
		}
	}
	if !anyOrigin && len(allowed) == 0 {
		return next
	}
	allowHeaders := strings.Join(allowedHeaders, ", ")
	exposeHeaders := strings.Join(exposedHeaders, ", ")
	maxAge := strconv.Itoa(2 * 60 * 60)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
		}
		if !anyOrigin && !allowed[strings.ToLower(origin)] {
			if preflight {
				http.Error(w, "origin not allowed", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r) // without CORS headers the browser hides the answer
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if !preflight {
			h.Set("Access-Control-Expose-Headers", exposeHeaders)
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Methods", "GET, POST")
		h.Set("Access-Control-Allow-Headers", allowHeaders)
		h.Set("Access-Control-Max-Age", maxAge)
		if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
