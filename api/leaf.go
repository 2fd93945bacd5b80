package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// Leaf's HTTP API (Meituan Leaf's LeafController), so that a Leaf client
// points at seqd by changing its address:
//
//	GET /api/segment/get/{tag}    the next value of key 0 of the space the
//	                              tag maps to (seqd.ForeignName)
//	GET /api/snowflake/get/{key}  a flake id of the namespace key maps to,
//	                              or of namespace "default" when there is
//	                              no such namespace (Leaf ignores the key)
//
// An answer is the decimal number as text/plain, as Leaf answers. An error
// is the HTTP status of its Connect code (connect's own table: 400, 404,
// 429, 503, ...) with the error's text on one line. Segment values take the
// path of Sequences (coalesced per space and group, any server answers,
// unavailable retried for a while); ids come from this server's worker, as
// NextIds does. With --token-sequence both need the bearer token.

// getOnly answers any method but GET (and HEAD) with 405, as a
// "GET /path" pattern of http.ServeMux would.
func getOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: Leaf's API answers GET", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	})
}

func (s *Server) leafSegment(w http.ResponseWriter, r *http.Request) {
	tag, space, ok := s.leafName(w, r, "tag", seqv1connect.SequenceServiceNextProcedure)
	if !ok {
		return
	}
	vals, errs := s.seqs.Next(r.Context(), space, []uint64{0})
	if errs != nil {
		err := errs[0]
		if connect.CodeOf(err) == connect.CodeNotFound {
			err = connect.NewError(connect.CodeNotFound, fmt.Errorf("tag %q is space %q, which does not exist: create it with seqd space create %s", tag, space, space))
		}
		leafError(w, err)
		return
	}
	leafAnswer(w, strconv.FormatUint(vals[0], 10))
}

func (s *Server) leafSnowflake(w http.ResponseWriter, r *http.Request) {
	_, ns, ok := s.leafName(w, r, "key", seqv1connect.IdServiceNextIdsProcedure)
	if !ok {
		return
	}
	out, err := s.nextIDs(r.Context(), ns, 1, 0, false)
	if errors.Is(err, seqd.ErrUnknownNamespace) {
		out, err = s.nextIDs(r.Context(), DefaultNamespace, 1, 0, false)
	}
	if err != nil {
		leafError(w, s.toConnect(err))
		return
	}
	leafAnswer(w, strconv.FormatInt(out.GetIds()[0], 10))
}

// leafName passes admit as procedure (the bearer token when sequence calls
// need it; a fenced server refuses), and maps
// the path value param (a tag or key) to a name (seqd.ForeignName); it
// answers the error itself when it reports false.
func (s *Server) leafName(w http.ResponseWriter, r *http.Request, param, procedure string) (given, name string, ok bool) {
	if err := s.admit(procedure, r.Header); err != nil {
		leafError(w, err)
		return "", "", false
	}
	given = r.PathValue(param)
	name, err := seqd.ForeignName(given)
	if err != nil {
		leafError(w, s.toConnect(fmt.Errorf("%s %q: %w", param, given, err)))
		return "", "", false
	}
	return given, name, true
}

func leafAnswer(w http.ResponseWriter, v string) {
	w.Header()["Content-Type"] = textPlain
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(v))
}

var textPlain = []string{"text/plain; charset=utf-8"}

// leafError answers a Connect error: its code's HTTP status and its
// message, one line.
func leafError(w http.ResponseWriter, err error) {
	code := connect.CodeOf(err)
	msg := err.Error()
	if ce := (*connect.Error)(nil); errors.As(err, &ce) {
		msg = ce.Message()
	}
	if code == connect.CodeUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header()["Content-Type"] = textPlain
	w.WriteHeader(httpStatus(code))
	_, _ = w.Write([]byte(code.String() + ": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(msg) + "\n"))
}

// httpStatus is the Connect protocol's HTTP status for a code.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeFailedPrecondition:
		return http.StatusPreconditionFailed
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}
