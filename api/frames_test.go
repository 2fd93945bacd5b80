package api_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

// framed is a test's own client of NextStream's framed transport, written
// from the protocol's description (seqd.StreamUpgrade), not from package
// client's code.
type framed struct {
	conn net.Conn
	r    *bufio.Reader
}

// dialFramed upgrades a connection to addr; it returns the HTTP status
// when the server does not switch protocols.
func dialFramed(t testing.TB, addr, auth string) (*framed, int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "POST " + seqv1connect.SequenceServiceNextStreamProcedure + " HTTP/1.1\r\nHost: " + addr +
		"\r\nConnection: Upgrade\r\nUpgrade: " + seqd.StreamUpgrade + "\r\nContent-Length: 0\r\n"
	if auth != "" {
		req += "Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, resp.StatusCode
	}
	return &framed{conn: conn, r: r}, resp.StatusCode
}

func (f *framed) send(m *seqv1.NextStreamRequest) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	_, err = f.conn.Write(append(binary.AppendUvarint(nil, uint64(len(b))), b...))
	return err
}

func (f *framed) receive() (*seqv1.NextStreamResponse, error) {
	n, err := binary.ReadUvarint(f.r)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(f.r, b); err != nil {
		return nil, err
	}
	out := &seqv1.NextStreamResponse{}
	return out, proto.Unmarshal(b, out)
}

func (f *framed) roundTrip(t testing.TB, space string, keys ...uint64) *seqv1.NextStreamResponse {
	t.Helper()
	return exchange(t, f.send, f.receive, space, keys...)
}

// TestFramedStreamAnswersLikeTheConnectStream: on the framed transport,
// through a follower, messages are answered in order as unary Next calls
// (values increasing, the leader named, bad input answered with its code
// without ending the stream); a message longer than the read limit, or one
// that does not decode, ends that connection and no other; the token is
// checked on the upgrade; and closing the server closes the connections.
func TestFramedStreamAnswersLikeTheConnectStream(t *testing.T) {
	leader, follower := leaderAndFollower(t)
	f, code := dialFramed(t, follower.APIAddr, "")
	if f == nil {
		t.Fatalf("upgrade: status %d", code)
	}
	var last uint64
	for i := range 3 {
		r := served(t, f.send, f.receive, "", 9, 10)
		if r.GetCode() != 0 || len(r.GetValues()) != 2 || r.GetValues()[0] <= last || r.GetLeader() != leader.APIAddr {
			t.Fatalf("answer %d: %v, want two values above %d naming %s", i, r, last, leader.APIAddr)
		}
		last = r.GetValues()[0]
		if r := f.roundTrip(t, "Bad Name", 1); connect.Code(r.GetCode()) != connect.CodeInvalidArgument {
			t.Fatalf("a bad space name: %v, want invalid_argument", r)
		}
		if r := f.roundTrip(t, "nope", 1); connect.Code(r.GetCode()) != connect.CodeNotFound {
			t.Fatalf("an unknown space: %v, want not_found", r)
		}
	}

	// Malformed input ends its connection only.
	for name, junk := range map[string][]byte{
		"too long":      binary.AppendUvarint(nil, 64<<20),
		"not a message": append(binary.AppendUvarint(nil, 3), 0xff, 0xff, 0xff),
	} {
		g, _ := dialFramed(t, leader.APIAddr, "")
		if _, err := g.conn.Write(junk); err != nil {
			t.Fatal(err)
		}
		_ = g.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := g.receive(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmtErr(err), "reset") {
			t.Fatalf("%s: %v, want the connection closed", name, err)
		}
	}
	if r := served(t, f.send, f.receive, "", 9); r.GetCode() != 0 {
		t.Fatalf("the first connection after another's malformed input: %v", r)
	}

	// The token, on a server guarding SequenceService.
	srv := api.New(leader.Node(), nil, api.WithToken("s3cret", true))
	ln := listen(t)
	hs := api.NewHTTPServer(srv.Handler())
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	if g, code := dialFramed(t, ln.Addr().String(), ""); g != nil || code != http.StatusUnauthorized {
		t.Fatalf("an upgrade without the token: status %d, want 401", code)
	}
	g, code := dialFramed(t, ln.Addr().String(), "Bearer s3cret")
	if g == nil {
		t.Fatalf("an upgrade with the token: status %d", code)
	}
	if r := served(t, g.send, g.receive, "", 9); r.GetCode() != 0 {
		t.Fatalf("with the token: %v", r)
	}
	// Close ends the upgraded connections (net/http's Close does not know
	// them) and refuses new ones.
	if err := srv.Close(t.Context()); err != nil {
		t.Logf("close: %v", err) // the flake workers' release, best effort
	}
	_ = g.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := g.receive(); err == nil {
		t.Fatal("an upgraded connection outlived the server's Close")
	}
	if h, code := dialFramed(t, ln.Addr().String(), "Bearer s3cret"); h != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("an upgrade after Close: status %d, want 503", code)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestFramedStreamSlowConsumerBoundedMemory is
// TestNextStreamSlowConsumerBoundedMemory on the framed transport: the
// server reads a message only after it wrote the last answer, so a client
// that does not read is stopped by the sockets' buffers.
func TestFramedStreamSlowConsumerBoundedMemory(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	f, code := dialFramed(t, leader.APIAddr, "")
	if f == nil {
		t.Fatalf("upgrade: status %d", code)
	}
	slowConsumer(t, f.send, f.receive, func() { f.conn.Close() })
}
