package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// RemoveNode removes server id from the raft configuration.
func (c *Client) RemoveNode(ctx context.Context, id string) error {
	// No attempt timeout: an attempt that timed out may have removed the
	// server, and a retry would remove the same ID again (a wiped server
	// may have rejoined under it meanwhile). ctx bounds the call; only
	// unavailable answers and failed connections are tried elsewhere.
	_, err := retry(c, ctx, 0, nil, noGroup, func(ctx context.Context, n *node) (*seqv1.RemoveNodeResponse, error) {
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

// DrainNode makes server id hand every raft group it leads to other voters
// (undo: lead again). It returns how many groups the server still leads;
// ctx bounds the wait (the server gives up at its own bound, 30s, too).
func (c *Client) DrainNode(ctx context.Context, id string, undo bool) (int, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.DrainNodeResponse, error) {
		r, err := n.admin.DrainNode(ctx, connect.NewRequest(&seqv1.DrainNodeRequest{Id: id, Undo: undo}))
		return msg(r, err)
	})
	if err != nil {
		return 0, err
	}
	return int(resp.GetGroupsLed()), nil
}
