package client

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"time"
)

// oneWrite is the HTTP/1.1 transport's RoundTripper: it makes net/http send
// a small request's headers and body in one write. net/http flushes the
// headers on their own unless the body is a reader it knows to be in memory
// (a *bytes.Reader, say), and connect-go's unary request body is not one; two
// writes cost a system call on each side and, often, a wake-up of the
// server's reading goroutine between them. So a body of known length up to
// oneWriteMax is read into memory first and sent from a *bytes.Reader.
type oneWrite struct{ base http.RoundTripper }

// oneWriteMax bounds the bodies copied (a Next of 10,000 keys is under 100 KiB).
const oneWriteMax = 128 << 10

func (t oneWrite) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > oneWriteMax {
		return t.base.RoundTrip(r)
	}
	buf := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, buf)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r2 := new(http.Request) // a RoundTripper must not modify its request
	*r2 = *r
	r2.Body = io.NopCloser(bytes.NewReader(buf))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return t.base.RoundTrip(r2)
}

// newTLS returns the default client over TLS: HTTP/2 when h2 (HTTP/1.1
// also offered, as ALPN picks), else HTTP/1.1 as newHTTP1.
func newTLS(cfg *tls.Config, h2 bool) *http.Client {
	var p http.Protocols
	p.SetHTTP1(true)
	t := &http.Transport{
		TLSClientConfig:     cfg.Clone(),
		Protocols:           &p,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	if h2 {
		p.SetHTTP2(true)
		t.MaxIdleConnsPerHost = 64
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: oneWrite{t}}
}

func newH2C() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, MaxIdleConnsPerHost: 64}}
}

// newHTTP1 keeps up to 256 idle connections per node, so that even many
// concurrent uncoalesced callers reuse their connections.
func newHTTP1() *http.Client {
	var p http.Protocols
	p.SetHTTP1(true)
	return &http.Client{Transport: oneWrite{&http.Transport{
		Protocols:           &p,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}}}
}
