package client

import (
	"bytes"
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// Backup fetches a consistent copy of the cluster's replicated state from the
// leader and writes it to w (only once it has been received whole). It
// retries as every call does (unavailable answers, following the leader
// hint, and transport failures, for up to RetryFor), but no single attempt
// is bounded by AttemptTimeout: a backup takes as long as its data does
// (ctx bounds it).
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	buf, err := retry(c, ctx, 0, nil, noGroup, func(ctx context.Context, n *node) (*bytes.Buffer, error) {
		stream, err := n.admin.Backup(ctx, connect.NewRequest(&seqv1.BackupRequest{}))
		if err != nil {
			return nil, err
		}
		defer stream.Close()
		var buf bytes.Buffer
		for stream.Receive() {
			buf.Write(stream.Msg().GetData())
		}
		if err := stream.Err(); err != nil {
			return nil, err
		}
		return &buf, nil
	})
	if err != nil {
		return 0, err
	}
	if buf.Len() == 0 {
		return 0, errors.New("client: empty backup")
	}
	return buf.WriteTo(w)
}
