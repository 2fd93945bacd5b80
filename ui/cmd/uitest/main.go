// Command uitest is a test harness for the status page, for a seqd binary
// that does not mount the page itself. It serves the page (ui.Handler) on
// --ui-addr and, on --api-addr, a reverse proxy to the cluster's API nodes
// wrapped in api.CORS for the page's origin, so the browser calls the API
// cross-origin (with preflights) exactly as it would call a seqd started with
// --cors-origin. Open http://<ui-addr>/ui/?api=http://<api-addr>.
//
// The proxy sends each request to the node that answered last and moves on
// to the next node when one cannot be reached (a killed process), so the page
// keeps working through the loss of any node. Not for production use.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/ui"
)

func main() {
	uiAddr := flag.String("ui-addr", "127.0.0.1:7780", "where the page is served (under /ui/)")
	apiAddr := flag.String("api-addr", "127.0.0.1:7781", "where the CORS-enabled API proxy listens")
	nodes := flag.String("nodes", "127.0.0.1:7710,127.0.0.1:7720,127.0.0.1:7730", "comma-separated API addresses of the cluster")
	origins := flag.String("cors-origin", "", "allowed origins (default: the page's, http://<ui-addr>)")
	flag.Parse()
	var targets []string
	for _, n := range strings.Split(*nodes, ",") {
		if n = strings.TrimSpace(n); n != "" {
			targets = append(targets, n)
		}
	}
	if len(targets) == 0 {
		log.Fatal("--nodes is empty")
	}
	allow := []string{"http://" + *uiAddr}
	if *origins != "" {
		allow = strings.Split(*origins, ",")
	}

	pageMux := http.NewServeMux()
	pageMux.Handle(ui.Prefix, ui.Handler())
	pageMux.Handle("/{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))

	fo := &failover{nodes: targets, base: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "placeholder" // chosen per attempt by failover
			pr.Out.Host = ""
		},
		Transport:     fo,
		FlushInterval: -1, // stream gRPC-Web and Connect streams as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "uitest proxy: "+err.Error(), http.StatusBadGateway)
		},
	}

	errs := make(chan error, 2)
	for _, s := range []struct {
		addr string
		h    http.Handler
	}{{*uiAddr, pageMux}, {*apiAddr, api.CORS(allow, proxy)}} {
		srv := &http.Server{Addr: s.addr, Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- srv.ListenAndServe() }()
	}
	fmt.Printf("uitest: page http://%s/ui/?api=http://%s  (API proxy to %s, CORS for %s)\n",
		*uiAddr, *apiAddr, strings.Join(targets, ","), strings.Join(allow, ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-errs:
		log.Fatal(err)
	case <-sig:
	}
}

// failover is a RoundTripper that sends a request to the node that answered
// last, and on a transport error (nothing answered) to the next one. Request
// bodies are small unary messages: they are buffered so an attempt can repeat.
type failover struct {
	nodes []string
	base  http.RoundTripper
	mu    sync.Mutex
	cur   int
}

func (f *failover) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	f.mu.Lock()
	start := f.cur
	f.mu.Unlock()
	var errs []error
	for i := range f.nodes {
		n := (start + i) % len(f.nodes)
		out := r.Clone(r.Context())
		out.URL.Host = f.nodes[n]
		out.Host = f.nodes[n]
		if body != nil {
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.ContentLength = int64(len(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		res, err := f.base.RoundTrip(out)
		if err == nil {
			f.mu.Lock()
			f.cur = n
			f.mu.Unlock()
			return res, nil
		}
		if r.Context().Err() != nil {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", f.nodes[n], err))
	}
	return nil, errors.Join(errs...)
}
