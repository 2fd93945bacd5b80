package client

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
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// NextStream's framed transport (the server's side is api/frames.go): an
// HTTP/1.1 request for the NextStream procedure's path asks to upgrade to
// seqd.StreamUpgrade; a server that answers 101 then reads
// NextStreamRequest messages and writes NextStreamResponse messages on the
// connection, each as an unsigned varint length and the message. A server
// without NextStream answers 404 (unimplemented).

// maxFrame bounds an answer's length (the server's own read limit is 4 MiB,
// and an answer of 10,000 values is under 100 KiB).
const maxFrame = 4 << 20

// framedCall is one framed NextStream connection.
type framedCall struct {
	conn net.Conn
	r    *bufio.Reader
	enc  []byte // Send's buffer; Send is never called concurrently
	// gen is the server's Seqd-Generation (from its 101 answer), checked
	// against the newest the client knows on every answer, as the
	// generations interceptor checks unary answers.
	gen  string
	gens *generations
}

// dialFrames opens a framed stream to the node at base (a base URL):
// TCP, or TLS with HTTP/1.1 as the only protocol offered, then the upgrade.
func (c *Client) dialFrames(ctx context.Context, base string) (*framedCall, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	var conn net.Conn
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if c.opts.TLS != nil {
			cfg = c.opts.TLS.Clone()
		}
		cfg.NextProtos = []string{"http/1.1"}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		conn, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", u.Host)
	} else {
		conn, err = d.DialContext(ctx, "tcp", u.Host)
	}
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	f, err := c.upgrade(conn, u)
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return f, nil
}

// upgrade asks the server on conn to upgrade to the framed transport.
func (c *Client) upgrade(conn net.Conn, u *url.URL) (*framedCall, error) {
	var b strings.Builder
	b.WriteString("POST " + strings.TrimRight(u.Path, "/") + seqv1connect.SequenceServiceNextStreamProcedure + " HTTP/1.1\r\n")
	b.WriteString("Host: " + u.Host + "\r\nConnection: Upgrade\r\nUpgrade: " + seqd.StreamUpgrade + "\r\nContent-Length: 0\r\n")
	if c.opts.Token != "" {
		b.WriteString("Authorization: Bearer " + c.opts.Token + "\r\n")
	}
	if g := c.gens.named(); g != "" {
		b.WriteString(seqd.HeaderGeneration + ": " + g + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	gen := resp.Header.Get(seqd.HeaderGeneration)
	if err := c.gens.see(gen, false); err != nil { // checked; learned once it serves
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		code := connect.CodeUnknown
		switch resp.StatusCode {
		case http.StatusNotFound:
			code = connect.CodeUnimplemented // a server without NextStream
		case http.StatusUnauthorized:
			code = connect.CodeUnauthenticated
		case http.StatusServiceUnavailable:
			code = connect.CodeUnavailable // fenced, or stopping
		}
		return nil, connect.NewError(code, fmt.Errorf("client: %s answered the framed NextStream with %s", u.Host, resp.Status))
	}
	return &framedCall{conn: conn, r: r, gen: gen, gens: &c.gens}, nil
}

// Send writes one message.
func (f *framedCall) Send(m *seqv1.NextStreamRequest) error {
	f.enc = binary.AppendUvarint(f.enc[:0], uint64(proto.Size(m)))
	var err error
	if f.enc, err = (proto.MarshalOptions{}).MarshalAppend(f.enc, m); err != nil {
		return err
	}
	_, err = f.conn.Write(f.enc)
	return err
}

// Receive reads one answer.
func (f *framedCall) Receive() (*seqv1.NextStreamResponse, error) {
	n, err := binary.ReadUvarint(f.r)
	if err != nil {
		return nil, err
	}
	if n > maxFrame {
		return nil, errFrameTooLong
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(f.r, buf); err != nil {
		return nil, err
	}
	resp := &seqv1.NextStreamResponse{}
	if err := proto.Unmarshal(buf, resp); err != nil {
		return nil, err
	}
	if err := f.gens.see(f.gen, resp.GetCode() == 0); err != nil {
		return nil, err // the client met a generation that replaced this server's
	}
	return resp, nil
}

var errFrameTooLong = errors.New("client: an answer on the framed stream longer than 4 MiB")
