package client

import (
	"context"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// RemoveNode removes server id from the raft configuration.
func (c *Client) RemoveNode(ctx context.Context, id string) error {
	_, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.RemoveNodeResponse, error) {
		r, err := n.admin.RemoveNode(ctx, connect.NewRequest(&seqv1.RemoveNodeRequest{Id: id}))
		return msg(r, err)
	})
	return err
}
