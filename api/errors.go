package api

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/flake/holder"
	"github.com/seqd/seqd/group"
)

var (
	errNoKeys       = errors.New("keys must not be empty")
	errTooManyKeys  = errors.New("too many keys in one call")
	errBadCount     = errors.New("count out of range")
	errBadSpaceName = errors.New("malformed space name")
	// errRemovePartial means a server was removed from group 0 but not
	// from every other group in time (see removeFromGroups).
	errRemovePartial = errors.New("removal incomplete")
)

// toConnect maps an error from the layers below to a Connect error. It is the
// one place where seqd decides status codes. Errors that callers can act on
// keep their text; anything else is logged and sent as a bare "internal
// error", so internal details never reach clients.
func (s *Server) toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code, msg := classify(err)
	msg = withoutCodeWords(code, msg)
	if code == connect.CodeInternal {
		s.log.Error("internal error", "err", err)
		msg = "internal error"
	}
	out := connect.NewError(code, errors.New(msg))
	if code == connect.CodeUnavailable && !errors.Is(err, seqd.ErrSuperseded) {
		group := 0
		if ge := (*groupError)(nil); errors.As(err, &ge) {
			group = ge.group
		}
		s.addLeaderHint(out, group)
	}
	return out
}

func classify(err error) (connect.Code, string) {
	switch {
	case errors.Is(err, errRemovePartial), errors.Is(err, errFollowPartial):
		return connect.CodeDeadlineExceeded, err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded, "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled, "canceled"
	case errors.Is(err, seqd.ErrUnknownSpace), errors.Is(err, seqd.ErrUnknownNamespace):
		return connect.CodeNotFound, err.Error()
	case errors.Is(err, seqd.ErrInvalidArgument), errors.Is(err, seqd.ErrInvalidSpace),
		errors.Is(err, errNoKeys), errors.Is(err, errTooManyKeys), errors.Is(err, errBadCount),
		errors.Is(err, errBadSpaceName), errors.Is(err, seqd.ErrInvalidNamespace),
		errors.Is(err, flake.ErrInvalidID), errors.Is(err, flake.ErrInvalidLayout), errors.Is(err, flake.ErrInvalidShard),
		errors.Is(err, seqd.ErrBadGeneration):
		return connect.CodeInvalidArgument, err.Error()
	case errors.Is(err, seqd.ErrExhausted), errors.Is(err, seqd.ErrRateLimited), errors.Is(err, seqd.ErrNoWorker), errors.Is(err, seqd.ErrLifetimeOver),
		errors.Is(err, seqd.ErrIDsAhead):
		return connect.CodeResourceExhausted, err.Error()
	case errors.Is(err, seqd.ErrSpaceExists), errors.Is(err, seqd.ErrNamespaceExists):
		return connect.CodeAlreadyExists, err.Error()
	case errors.Is(err, seqd.ErrFenced), errors.Is(err, flake.ErrNoSecret), errors.Is(err, seqd.ErrNotOwner):
		return connect.CodeFailedPrecondition, err.Error()
	case errors.Is(err, holder.ErrClosed):
		return connect.CodeUnavailable, err.Error()
	case errors.Is(err, cluster.ErrUnknownServer):
		return connect.CodeNotFound, err.Error()
	case errors.Is(err, cluster.ErrLastVoter), errors.Is(err, cluster.ErrNoSuchGroup), errors.Is(err, cluster.ErrNotUpgraded):
		return connect.CodeFailedPrecondition, err.Error()
	case errors.Is(err, group.ErrConfigurationChanged):
		return connect.CodeAborted, err.Error()
	case errors.Is(err, seqd.ErrNotServing), errors.Is(err, seqd.ErrNotLeader),
		errors.Is(err, seqd.ErrNoLeader):
		return connect.CodeUnavailable, err.Error()
	}
	return connect.CodeInternal, ""
}

// withoutCodeWords drops a message's leading words when they only repeat
// its code ("invalid argument: count must be 1 to 10000" under
// invalid_argument), so that a client printing "code: message" says it once.
func withoutCodeWords(code connect.Code, msg string) string {
	words := strings.ReplaceAll(code.String(), "_", " ") + ": "
	if len(msg) > len(words) && strings.EqualFold(msg[:len(words)], words) {
		return msg[len(words):]
	}
	return msg
}

// addLeaderHint names the leader of group on e.
func (s *Server) addLeaderHint(e *connect.Error, group int) {
	id, addr := s.node.GroupLeader(group)
	if id != "" {
		e.Meta().Set(seqd.HeaderLeaderID, id)
	}
	if addr != "" {
		e.Meta().Set(seqd.HeaderLeader, addr)
	}
}

// logCall logs failed calls at a level that fits their code.
func (s *Server) logCall(procedure string, err error) {
	if err == nil {
		return
	}
	code := connect.CodeOf(err)
	level := slog.LevelDebug
	if code == connect.CodeInternal || code == connect.CodeUnknown {
		level = slog.LevelError
	}
	s.log.Log(context.Background(), level, "call failed", "procedure", procedure, "code", code.String(), "err", err)
}
