package client

import (
	"context"

	"connectrpc.com/connect"

	healthv1 "github.com/seqd/seqd/api/gen/grpc/health/v1"
)

// Health asks the first node given to New for its standard health status
// (grpc.health.v1.Health/Check) of service ("" for the server as a whole;
// seqd answers SERVING for seq.v1.SequenceService while the node knows a
// serving leader). It asks that node once: no retry, no other node, as a
// health check of one node should. It speaks the client's Protocol (GRPC for
// what a gRPC health checker sees).
func (c *Client) Health(ctx context.Context, service string) (healthv1.HealthCheckResponse_ServingStatus, error) {
	c.mu.Lock()
	n := c.nodes[0]
	c.mu.Unlock()
	r, err := n.health.Check(ctx, connect.NewRequest(&healthv1.HealthCheckRequest{Service: service}))
	if err != nil {
		return healthv1.HealthCheckResponse_UNKNOWN, err
	}
	return r.Msg.GetStatus(), nil
}
