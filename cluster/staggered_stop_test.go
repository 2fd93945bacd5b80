package cluster_test

import (
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/internal/testcluster"
)

// Servers stopped one by one, further apart than admit.ContactSlack (a
// maintenance window, a StatefulSet scaled to zero, systemctl stop host by
// host, or crashes one after another), and a majority of them back on
// their own data serves again without the last one stopped, as raft alone
// would: the later of the two has no witness (the other stopped earlier),
// and is let in on the answer of a voter that makes a majority with it
// (admit.ByAnswers), whether it stopped gracefully or crashed.
func TestServersStoppedOneByOneServeAgainAsAMajority(t *testing.T) {
	for _, stop := range []string{"graceful", "crash"} {
		t.Run(stop, func(t *testing.T) {
			c := testcluster.Start(t, 3, testcluster.Options{})
			c.WaitServingLeader(failoverWait)
			cl := newClient(t, c.APIAddrs(), client.Options{})
			before := advNext(t, cl, "default", 1)

			order := []*testcluster.Member{c.Nodes[2], c.Nodes[1], c.Nodes[0]}
			for i, m := range order {
				if i > 0 {
					// Each stop comes after the previous one's contact
					// record is more than the slack old.
					time.Sleep(admit.ContactSlack + time.Second)
				}
				if stop == "crash" {
					m.Kill()
				} else if err := m.Shutdown(); err != nil {
					t.Fatalf("graceful stop of %s: %v", m.ID, err)
				}
			}
			// The last one stopped (order[2]) stays away.
			order[0].Restart()
			order[1].Restart()
			m := c.WaitServingLeader(failoverWait, order[2])
			if kind := order[1].Node().Admission(0); kind != admit.ByAnswers {
				t.Errorf("%s admitted as %q, want %q", order[1].ID, kind, admit.ByAnswers)
			}
			cl2 := newClient(t, []string{order[0].APIAddr, order[1].APIAddr}, client.Options{})
			if v := advNext(t, cl2, "default", 1); v <= before {
				t.Fatalf("after the restart %s handed out %d for key 1, not above %d", m.ID, v, before)
			}
		})
	}
}
