package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// The HTTP layer in front of the Connect handlers: what a person with curl
// meets before any handler runs.
//
//   - An unknown path (or method of a service) gets 404 with a one-line body
//     naming what is served.
//   - A request Connect cannot read for its Content-Type (none, or one of no
//     protocol seqd speaks) gets 415 with a one-line body naming the types;
//     connect-go answers those with an empty body.
//   - A body over maxMessageBytes (a message, on a stream) is refused with invalid_argument (HTTP 400),
//     not connect-go's resource_exhausted: that code maps to HTTP 429 Too Many
//     Requests, which generic HTTP clients and proxies retry, and the same
//     body can never succeed. (A gRPC message whose length prefix is already
//     over the limit is refused by connect-go before its body is read, with
//     RESOURCE_EXHAUSTED as gRPC itself does; gRPC answers HTTP 200 either
//     way and its clients do not retry that code by default.)

// notFoundText is the body of a 404.
const notFoundText = "no such path %s: seqd serves its API at /seq.v1.SequenceService/, /seq.v1.IdService/, /seq.v1.AdminService/ and /grpc.health.v1.Health/ (POST), Leaf's GET /api/segment/get/{tag} and /api/snowflake/get/{key}, the status page at /ui/ and metrics at /metrics\n"

// contentTypeText is the body of a 415.
const contentTypeText = "unsupported Content-Type %q: send application/json or application/proto (Connect), application/grpc or application/grpc-web\n"

// front wraps the Connect handlers: the body limit on the way in, a line
// for a bare 415 or 404 on the way out.
func front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && !clientStreams[r.URL.Path] {
			r.Body = &limitedBody{rc: r.Body, left: maxMessageBytes}
		}
		next.ServeHTTP(&explainer{ResponseWriter: w, r: r}, r)
	})
}

// clientStreams holds the paths of the procedures whose request is a stream
// of messages (NextStream): their body lasts as long as the stream, so the
// limit is connect-go's per message (WithReadMaxBytes), not the body's.
var clientStreams = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range []protoreflect.FileDescriptor{seqv1.File_seq_v1_seq_proto, seqv1.File_seq_v1_id_proto} {
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				if md := svc.Methods().Get(j); md.IsStreamingClient() {
					m["/"+string(svc.FullName())+"/"+string(md.Name())] = true
				}
			}
		}
	}
	return m
}()

// limitedBody fails a read past its limit with a Connect error, which
// connect-go passes on as it is.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

// errBodyTooLarge is the error of a body over maxMessageBytes.
var errBodyTooLarge = connect.NewError(connect.CodeInvalidArgument,
	fmt.Errorf("request body over %d bytes (4 MiB): split the call (at most %d keys per call)", maxMessageBytes, seqd.MaxKeys))

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more than the limit tells a body at the limit from one
		// over it.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// explainer gives a one-line body to the answers connect-go and
// http.ServeMux leave bare or terse: a 415 (no body) and a plain-text 404
// ("404 page not found"). A 404 that is a Connect error (not_found, an
// unknown space) is JSON and passes untouched.
type explainer struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool
}

func (e *explainer) WriteHeader(code int) {
	h := e.Header()
	var line string
	switch {
	case e.replaced:
	case code == http.StatusUnsupportedMediaType:
		line = fmt.Sprintf(contentTypeText, e.r.Header.Get("Content-Type"))
	case code == http.StatusNotFound && strings.HasPrefix(h.Get("Content-Type"), "text/plain"):
		line = fmt.Sprintf(notFoundText, e.r.URL.Path)
	}
	if line == "" {
		e.ResponseWriter.WriteHeader(code)
		return
	}
	e.replaced = true
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Del("Content-Length")
	e.ResponseWriter.WriteHeader(code)
	_, _ = io.WriteString(e.ResponseWriter, line)
}

func (e *explainer) Write(p []byte) (int, error) {
	if e.replaced {
		return len(p), nil // the terse body our line replaces
	}
	return e.ResponseWriter.Write(p)
}

func (e *explainer) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (deadlines, full
// duplex) through the wrapper.
func (e *explainer) Unwrap() http.ResponseWriter { return e.ResponseWriter }
