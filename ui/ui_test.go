package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesPage(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html", `src="app.js"`},
		{"/ui/app.js", "text/javascript", "X-Grpc-Web"},
		{"/ui/style.css", "text/css", "--accent"},
	} {
		res, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(b), c.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", c.path, res.StatusCode, res.Header.Get("Content-Type"), c.contains, strings.Contains(string(b), c.contains))
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: no Content-Security-Policy", c.path)
		}
	}
	res, err := http.Post(srv.URL+"/ui/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405", res.StatusCode)
	}
}
