package checker

import (
	"fmt"

	"github.com/seqd/seqd/jepsen/record"
)

// Findings reports what the faults themselves saw break (record.Finding:
// a raft group left without a serving leader for longer than the failover
// target while a majority of its voters ran, a running cluster fenced by a
// restore that never served, a fenced server that served...): promises no
// checker of the history can see. Each finding is an anomaly, counted by
// its rule.
func Findings(ops []record.Op, limit int) *Result {
	r := &Result{Valid: Valid, Counts: map[string]int{}}
	for _, o := range ops {
		if !o.IsNemesis() || o.F != record.Finding {
			continue
		}
		if r.Counts[o.Rule] < limit {
			r.Anomalies = append(r.Anomalies, Anomaly{Rule: o.Rule, Msg: fmt.Sprintf("%s (fault %s #%d): %s", o.Rule, o.Fault, o.FaultID, o.Error), Ops: []record.Op{o}})
		}
		r.Counts[o.Rule]++
		r.Valid = Invalid
	}
	return r
}
