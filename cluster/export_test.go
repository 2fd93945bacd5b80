package cluster

import "github.com/hashicorp/raft"

// MembershipOn runs one leader's membership pass on conf, as a reconcile
// pass does on the configuration it read when it began.
func (n *Node) MembershipOn(conf raft.Configuration) { n.membership(conf) }

// MirrorOn runs one pass of group i's leader making group i follow conf0,
// as a reconcile pass does on group 0's configuration it read when it
// began.
func (n *Node) MirrorOn(i int, conf0 raft.Configuration) { n.mirrorMembership(i, conf0) }
