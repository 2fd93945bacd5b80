package api

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// Backup implements AdminService.Backup. With one raft group it is answered
// only by the serving leader: others answer unavailable with the leader's
// address. With several, this server gathers every group's part from the
// group's serving leader, here or forwarded once to it (a part asked for
// with the request's group is answered only by its leader, never
// forwarded), and streams the backup merged from them; a part that fails
// fails the call, with its group's leader hint.
func (s *Server) Backup(ctx context.Context, req *connect.Request[seqv1.BackupRequest], stream *connect.ServerStream[seqv1.BackupResponse]) error {
	w := &chunkWriter{stream: stream, buf: make([]byte, 0, backupChunk)}
	var err error
	switch {
	case req.Msg.Group != nil:
		g := int(req.Msg.GetGroup())
		if g >= s.node.Groups() {
			err = fmt.Errorf("%w: group %d of %d", seqd.ErrInvalidArgument, g, s.node.Groups())
			break
		}
		err = s.backupPart(ctx, req.Header(), g, w, false)
	case s.node.Groups() == 1:
		_, err = s.node.Backup(w)
	default:
		_, err = s.node.BackupGroups(ctx, w, func(ctx context.Context, g int, w io.Writer) error {
			return s.backupPart(ctx, req.Header(), g, w, true)
		})
	}
	if err == nil {
		err = w.flush()
	}
	err = s.toConnect(err)
	s.logCall(seqv1connect.AdminServiceBackupProcedure, err)
	return err
}

const backupChunk = 256 << 10

// backupForwardTimeout bounds a group's part fetched from its leader when
// the call has no deadline.
const backupForwardTimeout = 5 * time.Minute

// backupPart writes group g's part of a backup (cluster.Node.BackupGroup)
// to w: here if this server leads the group, else, when forward is set,
// fetched from the group's leader (forwardOnce). Its errors name the
// group, for the leader hint.
func (s *Server) backupPart(ctx context.Context, hdr http.Header, g int, w io.Writer, forward bool) error {
	var err error
	switch {
	case s.node.Group(g).IsLeader():
		_, err = s.node.BackupGroup(g, w)
	case !forward:
		err = seqd.ErrNotLeader
		if id, _ := s.node.GroupLeader(g); id == "" {
			err = seqd.ErrNoLeader
		}
	default:
		var werr error // a local write's failure, not the leader's
		_, err = s.forwardOnce(ctx, hdr, g, backupForwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
			req := connect.NewRequest(&seqv1.BackupRequest{Group: proto.Uint32(uint32(g))})
			maps.Copy(req.Header(), h)
			stream, err := p.admin.Backup(ctx, req)
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				if _, werr = w.Write(stream.Msg().GetData()); werr != nil {
					return werr
				}
			}
			return stream.Err()
		})
		if werr != nil {
			err = werr
		}
	}
	if err != nil {
		return &groupError{group: g, err: fmt.Errorf("group %d's part of the backup: %w", g, err)}
	}
	return nil
}

// chunkWriter sends what is written to it as BackupResponse messages.
type chunkWriter struct {
	stream *connect.ServerStream[seqv1.BackupResponse]
	buf    []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), backupChunk-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == backupChunk {
			if err := w.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.stream.Send(&seqv1.BackupResponse{Data: w.buf})
	w.buf = w.buf[:0]
	return err
}
