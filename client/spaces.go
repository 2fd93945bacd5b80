package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// Space changes and floors. A space's section size never changes, not even
// across a delete and a create under the same name, so the client's cache
// of section sizes (for routing keys to groups) is never wrong; a step is
// not cached.

// UpdateSpace changes an existing space's step.
func (c *Client) UpdateSpace(ctx context.Context, name string, step uint64) (*seqv1.Space, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.UpdateSpaceResponse, error) {
		r, err := n.admin.UpdateSpace(ctx, connect.NewRequest(&seqv1.UpdateSpaceRequest{Name: name, Step: step}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	return resp.GetSpace(), nil
}

// DeleteSpace removes a space from listings and calls, keeping its marks:
// a space created again under its name (with its section size) continues
// above every value it issued.
func (c *Client) DeleteSpace(ctx context.Context, name string) error {
	_, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.DeleteSpaceResponse, error) {
		r, err := n.admin.DeleteSpace(ctx, connect.NewRequest(&seqv1.DeleteSpaceRequest{Name: name}))
		return msg(r, err)
	})
	return err
}

// SetFloor makes every value of keys (of space; "" for the default) from
// now on larger than floor; the other keys of their sections jump with
// them. Keys beyond seqd.MaxKeys are sent in several calls. Retrying is
// safe: a floor is a maximum.
func (c *Client) SetFloor(ctx context.Context, space string, floor uint64, keys ...uint64) error {
	if floor > seqd.MaxValue {
		return fmt.Errorf("%w: floor %d is above 2^63-1", seqd.ErrInvalidArgument, floor)
	}
	for len(keys) > 0 {
		n := min(len(keys), seqd.MaxKeys)
		_, err := call(c, ctx, func(ctx context.Context, nd *node) (*seqv1.SetFloorResponse, error) {
			r, err := nd.admin.SetFloor(ctx, connect.NewRequest(&seqv1.SetFloorRequest{Space: space, Keys: keys[:n], Floor: floor}))
			return msg(r, err)
		})
		if err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// DeleteNamespace removes a flake namespace from listings and calls and
// fences its holders, keeping its time floor and its workers' marks.
func (c *Client) DeleteNamespace(ctx context.Context, name string) error {
	_, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.DeleteNamespaceResponse, error) {
		r, err := n.admin.DeleteNamespace(ctx, connect.NewRequest(&seqv1.DeleteNamespaceRequest{Name: name}))
		return msg(r, err)
	})
	return err
}

// SetFloors is SetFloor with a floor per key (floors[i] for keys[i]): each
// key's section is raised once, to the largest floor of its keys, as a bulk
// import wants. At most seqd.MaxKeys keys per call.
func (c *Client) SetFloors(ctx context.Context, space string, keys, floors []uint64) error {
	if len(keys) != len(floors) || len(keys) > seqd.MaxKeys {
		return fmt.Errorf("%w: %d keys and %d floors (the same number, at most %d)", seqd.ErrInvalidArgument, len(keys), len(floors), seqd.MaxKeys)
	}
	_, err := call(c, ctx, func(ctx context.Context, nd *node) (*seqv1.SetFloorResponse, error) {
		r, err := nd.admin.SetFloor(ctx, connect.NewRequest(&seqv1.SetFloorRequest{Space: space, Keys: keys, Floors: floors}))
		return msg(r, err)
	})
	return err
}
