package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/metrics"
)

// fixedSource is a server as the node collector sees it (Source): a
// status and a clock skew, fixed.
type fixedSource struct{ st cluster.LocalStatus }

func (f fixedSource) Status() cluster.LocalStatus { return f.st }
func (f fixedSource) ClockSkew() time.Duration    { return 1500 * time.Millisecond }

// TestNodeCollectorReadsSource: the collector exports what its Source
// reports (the server's gauges, one series per group, the leader's clock
// skew), and nothing of a node before SetNode.
func TestNodeCollectorReadsSource(t *testing.T) {
	m := metrics.New()
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return string(b)
	}
	if out := scrape(); strings.Contains(out, "seqd_group_raft_term") {
		t.Fatalf("group series before SetNode:\n%s", out)
	}
	m.SetNode(fixedSource{cluster.LocalStatus{ID: "s1", State: "Leader", Serving: true, Term: 7,
		Groups: []cluster.GroupStatus{{Group: 0, State: "Leader", Term: 7}, {Group: 1, State: "Follower", Term: 3}}}})
	out := scrape()
	for _, want := range []string{
		`seqd_group_raft_term{group="0"} 7`, `seqd_group_raft_term{group="1"} 3`,
		"seqd_flake_leader_clock_skew_seconds 1.5", "seqd_groups 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the exposition", want)
		}
	}
}

// BenchmarkNextAnswered is the metrics' cost of one NextStream message
// (counted, timed, its values counted), paid per message on the server.
func BenchmarkNextAnswered(b *testing.B) {
	m := metrics.New()
	for b.Loop() {
		m.NextAnswered(0, 12, 40*time.Microsecond)
	}
}
