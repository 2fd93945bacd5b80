package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
)

// TestKindsApplied: a leader writes a space or namespace change only while
// every other server of the configuration is alive in gossip and publishes
// that it applies the change's kind; a server of a build before the
// publication (no bits) applies only the kinds of its time.
func TestKindsApplied(t *testing.T) {
	conf := raft.Configuration{Servers: []raft.Server{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	space := fsm.KindBit(fsm.KindDeleteSpace)
	now := Member{Alive: true, Meta: Meta{Kinds: fsm.KindsApplied()}}
	older := Member{Alive: true} // publishes nothing
	for name, c := range map[string]struct {
		b, c    Member
		missing bool
		kinds   uint64
		fails   string
	}{
		"every server applies it":         {now, now, false, space, ""},
		"a server of an older build":      {now, older, false, space, "server c runs a build that skips"},
		"an older build, an old kind":     {now, older, false, fsm.KindBit(fsm.KindRelease), ""},
		"a server down":                   {now, Member{Meta: Meta{Kinds: fsm.KindsApplied()}}, false, space, "server c is not alive"},
		"a server gossip has not seen":    {now, now, true, space, "server c is not alive"},
		"the namespace deletion, too":     {now, older, false, fsm.KindBit(fsm.KindDeleteNamespace), "server c runs a build"},
		"several kinds, all of them held": {now, now, false, space | fsm.KindBit(fsm.KindUpdateSpace), ""},
	} {
		member := func(id string) (Member, bool) {
			switch {
			case id == "b":
				return c.b, true
			case id == "c" && !c.missing:
				return c.c, true
			}
			return Member{}, false
		}
		err := kindsApplied(conf, "a", member, c.kinds)
		if (err == nil) != (c.fails == "") || (err != nil && !strings.Contains(err.Error(), c.fails)) {
			t.Errorf("%s: %v, want %q", name, err, c.fails)
		}
	}
	if fsm.KindsApplied()&space == 0 || fsm.KindsAppliedBefore&space != 0 {
		t.Fatalf("KindsApplied %b, before %b", fsm.KindsApplied(), fsm.KindsAppliedBefore)
	}
}

// TestClusterValueInUse: a cluster value is refused while a live server of
// another cluster publishes it; this cluster's own servers, dead ones and
// servers of no cluster yet do not count.
func TestClusterValueInUse(t *testing.T) {
	m := func(id, cluster string, alive bool, vals ...uint64) Member {
		return Member{Alive: alive, Meta: Meta{ID: id, Cluster: cluster, FlakeClusters: vals}}
	}
	members := []Member{m("a", "mine", true, 1), m("x", "other", true, 2, 3), m("y", "third", false, 4), m("z", "", true, 5)}
	for v, want := range map[uint64]bool{1: false, 2: true, 3: true, 4: false, 5: false, 6: false} {
		err := clusterValueInUse(members, "mine", v)
		if (err != nil) != want || (err != nil && !errors.Is(err, ErrClusterValueInUse)) {
			t.Errorf("value %d: %v, want in use %v", v, err, want)
		}
	}
}
