package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestStreamAnswerNamesWhereAForwardedShareWent: a stream message with
// keys of a group its server leads and of a group another server leads is
// answered with the values of both, and names the other group's leader
// and its Seqd-Group, as a message of that group alone would, so that a
// client sending the groups of one server in one message learns of a
// group that moved off it. The same call as a unary Next names no leader
// (a client that sends whole calls to one server would take it for the
// server to use next).
func TestStreamAnswerNamesWhereAForwardedShareWent(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	keys := testcluster.KeyPerGroup(groups)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		leaders := c.GroupLeaders()
		at, other := leaders[0], leaders[1]
		if at == nil || other == nil || at == other {
			t.Fatalf("groups 0 and 1 want two serving leaders: %v", leaders)
		}
		st := openStream(t, ctx, at.APIAddr, nil)
		r := served(t, st.Send, st.Receive, "", keys[0], keys[1])
		st.CloseRequest()
		if r.GetCode() != 0 {
			t.Fatalf("answered %v: %s", connect.Code(r.GetCode()), r.GetMessage())
		}
		if len(r.GetValues()) != 2 || r.GetValues()[0] == 0 || r.GetValues()[1] == 0 {
			t.Fatalf("values %v for keys %v", r.GetValues(), keys[:2])
		}
		req := connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{keys[0], keys[1]}})
		u, err := seqv1connect.NewSequenceServiceClient(http.DefaultClient, "http://"+at.APIAddr).Next(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if moved := c.GroupLeaders(); moved[0] != at || moved[1] != other {
			t.Logf("attempt %d: a leader moved during the calls; again", attempt)
			continue
		}
		if r.GetLeader() != other.APIAddr || !strings.HasPrefix(r.GetGroup(), "1 ") {
			t.Fatalf("stream answer of %s names leader %q, group %q; want %s, group 1", at.ID, r.GetLeader(), r.GetGroup(), other.APIAddr)
		}
		if h := u.Header().Get(seqd.HeaderLeader); h != "" {
			t.Fatalf("unary answer of several shares names leader %q", h)
		}
		return
	}
}
