package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// Backup fetches a consistent copy of the cluster's replicated state from the
// leader and writes it to w (only once it has been received whole). It
// follows the leader hint of unavailable answers, for up to RetryFor.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	deadline := time.Now().Add(c.opts.RetryFor)
	for {
		c.mu.Lock()
		idx := c.leader
		n := c.nodes[idx]
		c.mu.Unlock()
		var buf bytes.Buffer
		err := func() error {
			stream, err := n.admin.Backup(ctx, connect.NewRequest(&seqv1.BackupRequest{}))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				buf.Write(stream.Msg().GetData())
			}
			return stream.Err()
		}()
		if err == nil {
			if buf.Len() == 0 {
				return 0, errors.New("client: empty backup")
			}
			return buf.WriteTo(w)
		}
		if connect.CodeOf(err) != connect.CodeUnavailable || ctx.Err() != nil || time.Now().After(deadline) {
			return 0, err
		}
		c.mu.Lock()
		var ce *connect.Error
		if errors.As(err, &ce) && ce.Meta().Get(seqd.HeaderLeader) != "" && ce.Meta().Get(seqd.HeaderLeader) != n.addr {
			c.leader = c.addNodeLocked(ce.Meta().Get(seqd.HeaderLeader))
		} else if c.leader == idx {
			c.leader = (idx + 1) % len(c.nodes)
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(c.opts.MinBackoff):
		}
	}
}
