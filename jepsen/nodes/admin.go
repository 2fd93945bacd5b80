package nodes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// Drain calls AdminService.DrainNode{id: n, undo} on n itself, bounded by
// ctx (a drain waits until n leads no group, or until the deadline): n
// hands every group it leads to other voters and is nobody's preferred
// leader until undone. It returns how many groups n still leads.
func (c *Cluster) Drain(ctx context.Context, n *Node, undo bool) (uint32, error) {
	admin := seqv1connect.NewAdminServiceClient(c.http, "http://"+n.API)
	r, err := admin.DrainNode(ctx, connect.NewRequest(&seqv1.DrainNodeRequest{Id: n.ID, Undo: undo}))
	if err != nil {
		return 0, err
	}
	return r.Msg.GetGroupsLed(), nil
}

// CutGroup cuts (or restores) raft group g's traffic on node n, through
// the test hook POST /debug/seqd/cut-group that n serves only with
// --unsafe-test-hooks.
func (c *Cluster) CutGroup(ctx context.Context, n *Node, g int, cut bool) error {
	v := "0"
	if cut {
		v = "1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/debug/seqd/cut-group?group=%d&cut=%s", n.API, g, v), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cut-group on %s: %s: %s (does it run with --unsafe-test-hooks?)", n.ID, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
