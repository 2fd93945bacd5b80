// Package ui serves seqd's browser status page and the CORS layer that lets
// browsers on other origins call the API over Connect and gRPC-Web.
//
// The page (static/) is plain HTML and CSS plus app.js, a bundle of the
// TypeScript client in client/web built by `cd client/web && npm ci && npm run
// build`; the bundle is committed, so building seqd needs no npm.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/seqd/seqd"
)

//go:embed static
var static embed.FS

// Prefix is the path the page is served under.
const Prefix = "/ui/"

// Handler serves the status page under /ui/ (mount it with
// mux.Handle("/ui/", ui.Handler())). The page talks to the API of the node
// that served it, at the same origin, or to the node named by ?api=URL.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		// No inline script or style; the page may call any API origin (?api=).
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' http: https:; img-src 'self' data:; "+
			"style-src 'self'; script-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Embedded files have no modification time, so no validators: a
		// browser refetches these few small files rather than keep a page
		// from before an upgrade.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// Request headers Connect and gRPC-Web clients send (browsers add the rest).
var allowedHeaders = []string{
	"Content-Type", "Connect-Protocol-Version", "Connect-Timeout-Ms",
	"Connect-Accept-Encoding", "Connect-Content-Encoding",
	"Grpc-Timeout", "Grpc-Accept-Encoding", "Grpc-Encoding",
	"X-Grpc-Web", "X-User-Agent", "Authorization",
}

// Response headers and trailers browser code may read.
var exposedHeaders = []string{
	"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin",
	seqd.HeaderLeader, seqd.HeaderLeaderID, seqd.HeaderRoutingVersion,
}

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
