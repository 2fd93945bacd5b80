package main

import (
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/jepsen/record"
)

func TestGroupOutages(t *testing.T) {
	const groups, ss = 6, 2
	// One key in group 0 and one in another group.
	k0, k1 := uint64(0), uint64(0)
	for k := uint64(1); k < 64; k++ {
		if seqd.GroupOfKey("jepsen", ss, k, groups) != seqd.GroupOfKey("jepsen", ss, k0, groups) {
			k1 = k
			break
		}
	}
	g0, g1 := seqd.GroupOfKey("jepsen", ss, k0, groups), seqd.GroupOfKey("jepsen", ss, k1, groups)
	ms := time.Millisecond
	var ops []record.Op
	for i := range 100 {
		at := time.Duration(i) * 10 * ms
		ops = append(ops, record.Op{Client: "s1", F: "next", Keys: []uint64{k0}, Type: record.OK, Invoke: at, Complete: at + ms})
		// k1's group has no ok call from 300 ms to 700 ms: calls fail there.
		typ := record.OK
		if at >= 300*ms && at < 700*ms {
			typ = record.Fail
		}
		ops = append(ops, record.Op{Client: "s2", F: "next", Keys: []uint64{k1}, Type: typ, Invoke: at, Complete: at + ms})
	}
	ops = append(ops, record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: "pause-leader", FaultID: 1, Targets: []string{"n1"}, Invoke: 300 * ms, Complete: 300 * ms, Type: record.Info})
	ops = append(ops, record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: "pause-leader", FaultID: 1, Targets: []string{"n1"}, Invoke: 650 * ms, Complete: 650 * ms, Type: record.Info})
	gs := groupOutages(ops, "jepsen", ss, groups, minGroupOutage, record.Windows(ops, record.End(ops)))
	if len(gs) != 2 {
		t.Fatalf("groups %+v", gs)
	}
	for _, a := range gs {
		switch a.Group {
		case g0:
			if len(a.Windows) != 0 || a.OKCalls != 100 {
				t.Errorf("group %d: %+v", a.Group, a)
			}
		case g1:
			if len(a.Windows) != 1 || a.Windows[0].Start != 291*ms || a.Windows[0].Length != 410*ms || len(a.Windows[0].Faults) != 1 {
				t.Errorf("group %d: %+v", a.Group, a)
			}
		default:
			t.Errorf("unexpected group %d", a.Group)
		}
	}
	if groupOutages(ops, "jepsen", ss, 1, minGroupOutage, nil) != nil {
		t.Error("a single group has no per-group report")
	}
}
