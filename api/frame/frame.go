package frame

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// MaxMessage bounds the length of one message, either way (the server's
// read limit on a request; an answer of 10,000 values is under 100 KiB).
const MaxMessage = 4 << 20

// ErrTooLong is the error of a message longer than MaxMessage.
var ErrTooLong = errors.New("framed stream: a message longer than 4 MiB")

// Append appends m to dst as one frame: its length as an unsigned varint,
// then the message.
func Append(dst []byte, m proto.Message) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(proto.Size(m)))
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// Read reads one frame from r and returns its message's bytes, in buf when
// it is large enough (nil allocates).
func Read(r *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > MaxMessage {
		return nil, ErrTooLong
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// Dial connects to the server of base (a base URL, http:// or https://):
// TCP, or TLS with cfg (nil: the defaults) and HTTP/1.1 as the only
// protocol offered, bounded by ctx and two seconds.
func Dial(ctx context.Context, base *url.URL, cfg *tls.Config) (net.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	if base.Scheme != "https" {
		return d.DialContext(ctx, "tcp", base.Host)
	}
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	cfg.NextProtos = []string{"http/1.1"}
	if cfg.ServerName == "" {
		cfg.ServerName = base.Hostname()
	}
	return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", base.Host)
}

// Upgrade asks the server on conn to upgrade to the framed transport, with
// the header fields of hdr (the token, Seqd-Forwarded, Seqd-Generation),
// and returns its answer and the reader of the connection, positioned
// after the answer. The caller checks the status (Refused).
func Upgrade(conn net.Conn, base *url.URL, hdr http.Header) (*http.Response, *bufio.Reader, error) {
	var b strings.Builder
	b.WriteString("POST " + strings.TrimRight(base.Path, "/") + seqv1connect.SequenceServiceNextStreamProcedure + " HTTP/1.1\r\n")
	b.WriteString("Host: " + base.Host + "\r\nConnection: Upgrade\r\nUpgrade: " + seqd.StreamUpgrade + "\r\nContent-Length: 0\r\n")
	for k, vs := range hdr {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, nil, err
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
	}
	return resp, r, nil
}

// Refused is the error of an upgrade answered with resp's status instead
// of 101, with the Connect code the status stands for: unimplemented for a
// server without NextStream (404), unauthenticated (401), unavailable for
// a fenced or stopping server (503).
func Refused(host string, resp *http.Response) *connect.Error {
	code := connect.CodeUnknown
	switch resp.StatusCode {
	case http.StatusNotFound:
		code = connect.CodeUnimplemented
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusServiceUnavailable:
		code = connect.CodeUnavailable
	}
	return connect.NewError(code, fmt.Errorf("%s answered the framed NextStream with %s", host, resp.Status))
}
