package client

import (
	"bytes"
	"io"
	"net/http"
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
