package cluster

import "github.com/hashicorp/raft"

// MembershipOn runs one leader's membership pass on conf, as a reconcile
// pass does on the configuration it read when it began.
func (n *Node) MembershipOn(conf raft.Configuration) { n.membership(conf) }
