package api

import (
	"crypto/subtle"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/api/gen/seqd/peer/v1/peerv1connect"
)

var errUnauthenticated = errors.New("missing or wrong bearer token")

// guarded reports whether procedure needs the bearer token: AdminService and
// PeerService always, SequenceService and IdService with guardSequence.
func (s *Server) guarded(procedure string) bool {
	if strings.HasPrefix(procedure, "/"+seqv1connect.AdminServiceName+"/") ||
		strings.HasPrefix(procedure, "/"+peerv1connect.PeerServiceName+"/") {
		return true
	}
	return s.guardSequence && (strings.HasPrefix(procedure, "/"+seqv1connect.SequenceServiceName+"/") ||
		strings.HasPrefix(procedure, "/"+seqv1connect.IdServiceName+"/"))
}

// checkToken checks an Authorization header against the token (call it only
// when the server has one).
func (s *Server) checkToken(header string) error {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
		return connect.NewError(connect.CodeUnauthenticated, errUnauthenticated)
	}
	return nil
}
