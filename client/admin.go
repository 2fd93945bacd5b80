package client

import (
	"context"
	"fmt"

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

// LocateKeys returns the raft group owning each key of space ("" for the
// default space), in the keys' order, as the answering server computes it.
func (c *Client) LocateKeys(ctx context.Context, space string, keys ...uint64) ([]uint32, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.LocateKeysResponse, error) {
		r, err := n.admin.LocateKeys(ctx, connect.NewRequest(&seqv1.LocateKeysRequest{Space: space, Keys: keys}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetGroups()) != len(keys) {
		return nil, fmt.Errorf("seqd: LocateKeys answered %d groups for %d keys", len(resp.GetGroups()), len(keys))
	}
	return resp.GetGroups(), nil
}
