package flake

import (
	"fmt"

	"github.com/seqd/seqd"
)

// Namespace is a flake namespace: its ids' layout and obfuscation, fixed at
// creation, and its reference floor, in time units of the layout, that no
// grant starts below. The floor rises with the leader time of every grant
// and renewal and with a restore's time floor, and never falls, so the
// cluster's notion of a namespace's time never goes back even when a
// leader's wall clock does.
type Namespace struct {
	Name        string
	Layout      Layout
	Obfuscation string
	// KeyCheck identifies the obfuscation key (derived from the cluster
	// secret, never the key itself): a server whose secret derives another
	// check refuses to serve the namespace, since ids permuted under two
	// keys could collide.
	KeyCheck string
	Floor    uint64
}

// Obfuscation settings of a namespace (Namespace.Obfuscation).
const (
	// ObfuscateNone leaves ids in the clear (decodable by anyone).
	ObfuscateNone = ""
	// ObfuscateFF1 applies a keyed permutation (FF1) to every id's bits.
	ObfuscateFF1 = "ff1"
	// ObfuscateFF1Hour keeps the hour in the clear, for insert locality,
	// and permutes the bits below it.
	ObfuscateFF1Hour = "ff1-hour"
)

// ValidateNamespace checks a namespace's name, layout and obfuscation.
func ValidateNamespace(name string, l Layout, obfuscation string) error {
	if !seqd.ValidName(name) {
		return fmt.Errorf("%w: name %q (want 1 to %d of a-z, 0-9, and _ . - after the first)", seqd.ErrInvalidNamespace, name, seqd.MaxNameLen)
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("%w: %w", seqd.ErrInvalidNamespace, err)
	}
	switch obfuscation {
	case ObfuscateNone:
	case ObfuscateFF1, ObfuscateFF1Hour:
		if l.Bits() < 20 {
			return fmt.Errorf("%w: obfuscation needs a layout of at least 20 bits", seqd.ErrInvalidNamespace)
		}
		if !l.Plain() {
			return fmt.Errorf("%w: a layout with a shard or cluster field, or the sequence above the worker, cannot be obfuscated (its fields are meant to be read)", seqd.ErrInvalidNamespace)
		}
	default:
		return fmt.Errorf("%w: obfuscation %q (want %q, %q or none)", seqd.ErrInvalidNamespace, obfuscation, ObfuscateFF1, ObfuscateFF1Hour)
	}
	return nil
}
