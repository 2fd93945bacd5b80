// Package ui serves seqd's browser status page (the CORS layer that lets
// browsers on other origins call the API is api.CORS).
//
// The page (static/) is plain HTML and CSS plus app.js, a bundle of the
// TypeScript client in client/web built by `cd client/web && npm ci && npm run
// build`; the bundle is committed, so building seqd needs no npm.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
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
