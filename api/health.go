package api

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	healthv1 "github.com/seqd/seqd/api/gen/grpc/health/v1"
	"github.com/seqd/seqd/api/gen/grpc/health/v1/healthv1connect"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// health implements the standard grpc.health.v1.Health service.
type health struct{ s *Server }

// The services health answers for; "" is the server as a whole.
var healthServices = map[string]bool{
	"":                                    true,
	seqv1connect.SequenceServiceName:      true,
	seqv1connect.AdminServiceName:         true,
	healthv1connect.HealthName:            true,
	grpcreflect.ReflectV1ServiceName:      true,
	grpcreflect.ReflectV1AlphaServiceName: true,
}

// status is SERVING while this node can answer sequence calls: it knows
// group 0's leader, and if it is that leader, it holds group 0's lease.
func (h health) status() healthv1.HealthCheckResponse_ServingStatus {
	id, _ := h.s.node.GroupLeader(0)
	switch {
	case id == "":
		return healthv1.HealthCheckResponse_NOT_SERVING
	case id == h.s.node.ID() && !h.s.node.Group(0).Allocator().Serving():
		return healthv1.HealthCheckResponse_NOT_SERVING
	}
	return healthv1.HealthCheckResponse_SERVING
}

// Check implements grpc.health.v1.Health/Check.
func (h health) Check(ctx context.Context, req *connect.Request[healthv1.HealthCheckRequest]) (*connect.Response[healthv1.HealthCheckResponse], error) {
	if !healthServices[req.Msg.GetService()] {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service"))
	}
	return connect.NewResponse(&healthv1.HealthCheckResponse{Status: h.status()}), nil
}

// Watch implements grpc.health.v1.Health/Watch: it sends the status at once
// and again whenever it changes (checked every 200ms).
func (h health) Watch(ctx context.Context, req *connect.Request[healthv1.HealthCheckRequest], stream *connect.ServerStream[healthv1.HealthCheckResponse]) error {
	if !healthServices[req.Msg.GetService()] {
		return stream.Send(&healthv1.HealthCheckResponse{Status: healthv1.HealthCheckResponse_SERVICE_UNKNOWN})
	}
	last := healthv1.HealthCheckResponse_UNKNOWN
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if st := h.status(); st != last {
			if err := stream.Send(&healthv1.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
