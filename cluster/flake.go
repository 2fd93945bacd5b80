package cluster

import (
	"context"

	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/fsm"
)

// The flake state's types, as the API layer sees them (it talks to groups
// through cluster/ and group/, never fsm/).
type (
	FlakeOp     = fsm.FlakeOp
	FlakeResult = fsm.FlakeResult
	Worker      = fsm.Worker
	WorkerUse   = fsm.Use
)

// The flake operations (see fsm).
const (
	OpCreateNamespace = fsm.OpCreateNamespace
	OpAcquire         = fsm.OpAcquire
	OpRenew           = fsm.OpRenew
	OpRelease         = fsm.OpRelease
	OpReclaim         = fsm.OpReclaim

	ReclaimedHolder = fsm.ReclaimedHolder
)

// ApplyFlake decides flake operations on the leader (see
// group.Group.ApplyFlake).
func (n *Node) ApplyFlake(ctx context.Context, ops []fsm.FlakeOp) ([]fsm.FlakeResult, error) {
	return n.authority().ApplyFlake(ctx, ops)
}

// Namespace returns a flake namespace as this server's state has it.
func (n *Node) Namespace(name string) (flake.Namespace, bool) {
	return n.authority().FSM().Namespace(name)
}

// NamespaceDeleted reports whether this server's state has the namespace
// as deleted.
func (n *Node) NamespaceDeleted(name string) bool { return n.authority().FSM().NamespaceDeleted(name) }

// Namespaces returns every flake namespace as this server's state has it.
func (n *Node) Namespaces() []flake.Namespace { return n.authority().FSM().Namespaces() }

// Workers returns a namespace's workers as this server's state has it.
func (n *Node) Workers(name string) ([]fsm.Worker, bool) { return n.authority().FSM().Workers(name) }
