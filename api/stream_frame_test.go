package api_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// A measurement, not a feature: what a NextStream message would cost on a
// plain framed stream instead of HTTP/2. rawServe reads messages (a 4-byte
// length and a NextStreamRequest) from one TCP connection, serves each with
// the real Next handler, and writes the answers the same way, flushing when
// no more input is buffered: one goroutine per connection, a read and a
// write system call per batch of messages, none of HTTP/2's goroutine
// hand-offs. BenchmarkFramedStreamPipelined is BenchmarkNextStreamPipelined
// (4 messages of 16 keys in flight) on it; see BENCHMARKS.md.
func rawServe(s *api.Server, c net.Conn) {
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	var hdr [4]byte
	buf := make([]byte, 0, 4096)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		in := &seqv1.NextStreamRequest{}
		proto.Unmarshal(buf, in)
		resp, err := s.Next(context.Background(), connect.NewRequest(&seqv1.NextRequest{Keys: in.Keys}))
		out := &seqv1.NextStreamResponse{}
		if err == nil {
			out.Values = resp.Msg.Values
		} else {
			out.Code, out.Message = uint32(connect.CodeOf(err)), err.Error()
		}
		b, _ := proto.Marshal(out)
		binary.LittleEndian.PutUint32(hdr[:], uint32(len(b)))
		w.Write(hdr[:])
		w.Write(b)
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
}

func BenchmarkFramedStreamPipelined(b *testing.B) {
	leader := benchLeader(b)
	s := api.New(leader.Node(), nil)
	ln := listen(b)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go rawServe(s, c)
		}
	}()
	c, _ := net.Dial("tcp", ln.Addr().String())
	defer c.Close()
	slots := make(chan struct{}, 4)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		r := bufio.NewReader(c)
		var hdr [4]byte
		for range b.N {
			io.ReadFull(r, hdr[:])
			buf := make([]byte, binary.LittleEndian.Uint32(hdr[:]))
			io.ReadFull(r, buf)
			out := &seqv1.NextStreamResponse{}
			proto.Unmarshal(buf, out)
			if len(out.Values) != 16 {
				done <- fmt.Errorf("an answer of %d values for 16 keys (code %d %s)", len(out.Values), out.Code, out.Message)
				return
			}
			<-slots
		}
		done <- nil
	}()
	keys := make([]uint64, 16)
	var k uint64
	var hdr [4]byte
	for range b.N {
		k = spreadKeys(keys, k)
		select {
		case slots <- struct{}{}:
		case err := <-done:
			b.Fatal(err)
		}
		bb, _ := proto.Marshal(&seqv1.NextStreamRequest{Keys: keys})
		binary.LittleEndian.PutUint32(hdr[:], uint32(len(bb)))
		c.Write(append(hdr[:], bb...))
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
