package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/api/gen/seqd/peer/v1/peerv1connect"
)

var errUnauthenticated = errors.New("missing or wrong bearer token")

// authInterceptor checks the bearer token on guarded services.
type authInterceptor struct{ s *Server }

func (a authInterceptor) guarded(procedure string) bool {
	if strings.HasPrefix(procedure, "/"+seqv1connect.AdminServiceName+"/") ||
		strings.HasPrefix(procedure, "/"+peerv1connect.PeerServiceName+"/") {
		return true
	}
	return a.s.guardSequence && (strings.HasPrefix(procedure, "/"+seqv1connect.SequenceServiceName+"/") ||
		strings.HasPrefix(procedure, "/"+seqv1connect.IdServiceName+"/"))
}

func (a authInterceptor) check(procedure, header string) error {
	if !a.guarded(procedure) {
		return nil
	}
	return a.checkToken(header)
}

// checkToken checks an Authorization header against the admin token.
func (a authInterceptor) checkToken(header string) error {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(a.s.token)) != 1 {
		return connect.NewError(connect.CodeUnauthenticated, errUnauthenticated)
	}
	return nil
}

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(req.Spec().Procedure, req.Header().Get("Authorization")); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.Spec().Procedure, conn.RequestHeader().Get("Authorization")); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
