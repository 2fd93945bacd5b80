package client

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/frame"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// NextStream's framed transport (the server's side is api/frames.go; the
// wire is api/frame's): an HTTP/1.1 request for the NextStream procedure's
// path asks to upgrade to seqd.StreamUpgrade; a server that answers 101
// then reads NextStreamRequest messages and writes NextStreamResponse
// messages on the connection, each as an unsigned varint length and the
// message. A server without NextStream answers 404 (unimplemented).

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
	conn, err := frame.Dial(ctx, u, c.opts.TLS)
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
	hdr := http.Header{}
	if c.opts.Token != "" {
		hdr.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if g := c.gens.named(); g != "" {
		hdr.Set(seqd.HeaderGeneration, g)
	}
	resp, r, err := frame.Upgrade(conn, u, hdr)
	if err != nil {
		return nil, err
	}
	gen := resp.Header.Get(seqd.HeaderGeneration)
	if err := c.gens.see(gen, false); err != nil { // checked; learned once it serves
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, frame.Refused(u.Host, resp)
	}
	return &framedCall{conn: conn, r: r, gen: gen, gens: &c.gens}, nil
}

// Send writes one message.
func (f *framedCall) Send(m *seqv1.NextStreamRequest) error {
	var err error
	if f.enc, err = frame.Append(f.enc[:0], m); err != nil {
		return err
	}
	_, err = f.conn.Write(f.enc)
	return err
}

// Receive reads one answer.
func (f *framedCall) Receive() (*seqv1.NextStreamResponse, error) {
	buf, err := frame.Read(f.r, nil)
	if err != nil {
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
