package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// statusAnswer answers local-only ClusterStatus as a server of some build
// would: with the read index header or without it (a build that does not
// know the question), or refusing as a server that does not lead.
type statusAnswer struct {
	seqv1connect.UnimplementedAdminServiceHandler
	readIndex string // "" answers without the header
	refuse    bool
}

func (a statusAnswer) ClusterStatus(_ context.Context, req *connect.Request[seqv1.ClusterStatusRequest]) (*connect.Response[seqv1.ClusterStatusResponse], error) {
	if a.refuse {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
	}
	resp := connect.NewResponse(&seqv1.ClusterStatusResponse{Nodes: []*seqv1.Node{{
		Id: "n1", Groups: []*seqv1.GroupState{{Group: 0, Term: 3, AppliedIndex: 7}},
	}}})
	if a.readIndex != "" && req.Header().Get(seqd.HeaderReadIndex) == "0" {
		resp.Header().Set(seqd.HeaderReadIndex, a.readIndex)
	}
	return resp, nil
}

// TestPeerReadIndex: a peer's read index is the answer's header; a build
// that does not know the question answers without it, and its applied
// index stands for it (as every build before answered Progress); a server
// that does not lead answers unavailable, and no index.
func TestPeerReadIndex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer statusAnswer
		want   uint64
		code   connect.Code // 0: no error
	}{
		{"a leader of this build", statusAnswer{readIndex: "12"}, 12, 0},
		{"a build that does not know the question", statusAnswer{}, 7, 0},
		{"a server that does not lead", statusAnswer{refuse: true}, 0, connect.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle(seqv1connect.NewAdminServiceHandler(tc.answer))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			peers := api.Peers{HTTP: srv.Client()}.Host()
			got, err := peers.ReadIndex(context.Background(), strings.TrimPrefix(srv.URL, "http://"), 0)
			if got != tc.want || (tc.code == 0) != (err == nil) || (err != nil && connect.CodeOf(err) != tc.code) {
				t.Fatalf("ReadIndex = %d, %v; want %d, code %v", got, err, tc.want, tc.code)
			}
		})
	}
}
