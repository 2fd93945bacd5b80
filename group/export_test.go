package group

// AwaitTransfer starts a leadership transfer on raft, whatever raft's
// state, and waits for it as the group's moves do.
func AwaitTransfer(g *Group) error { return g.await(g.raft.LeadershipTransfer()) }
