package seqd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Generation names which restore of a cluster's state a server holds, so
// that every party (servers, clients) can tell a cluster that was
// restored elsewhere from the restore that replaced it.
//
//   - Lineage is fixed when a cluster first bootstraps (its first cluster
//     ID) and kept by every restore of its backups, and of theirs.
//   - Number counts the restores along the way: 0 for the cluster that
//     bootstrapped, and each `seqd restore` gives the backup's Number + 1.
//   - Cluster is the cluster ID of this restore (a restore always makes a
//     new one), so that two restores of one backup, which have the same
//     Lineage and Number, are told apart: they are siblings.
//
// A higher Number of one Lineage supersedes a lower one for good: a server
// that learns of it, from any source, stops serving (see cluster's fence),
// and a client never accepts an answer of the lower one again. Siblings
// are a conflict: a client keeps the first it met, and a server that
// learns of its sibling through a client stops.
type Generation struct {
	Lineage string
	Number  uint64
	Cluster string
}

// Known reports whether g names a lineage (servers of builds before
// generations, and servers without state, have none).
func (g Generation) Known() bool { return g.Lineage != "" }

// Supersedes reports whether g makes o obsolete: same lineage, higher
// number.
func (g Generation) Supersedes(o Generation) bool {
	return g.Known() && g.Lineage == o.Lineage && g.Number > o.Number
}

// Sibling reports whether g and o are two restores of one backup: same
// lineage and number, different clusters.
func (g Generation) Sibling(o Generation) bool {
	return g.Known() && g.Lineage == o.Lineage && g.Number == o.Number &&
		g.Cluster != "" && o.Cluster != "" && g.Cluster != o.Cluster
}

// String formats g as the HeaderGeneration value "lineage/number/cluster"
// ("" for an unknown generation).
func (g Generation) String() string {
	if !g.Known() {
		return ""
	}
	return g.Lineage + "/" + strconv.FormatUint(g.Number, 10) + "/" + g.Cluster
}

// ErrBadGeneration means a HeaderGeneration value is malformed.
var ErrBadGeneration = errors.New("malformed generation")

// ParseGeneration parses a HeaderGeneration value (see String). The empty
// string is the unknown generation.
func ParseGeneration(s string) (Generation, error) {
	if s == "" {
		return Generation{}, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 || !validID(parts[0]) || !validID(parts[2]) {
		return Generation{}, fmt.Errorf("%w: %q (want lineage/number/cluster)", ErrBadGeneration, s)
	}
	n, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return Generation{}, fmt.Errorf("%w: %q: number: %v", ErrBadGeneration, s, err)
	}
	return Generation{Lineage: parts[0], Number: n, Cluster: parts[2]}, nil
}

// validID reports whether s can be a cluster ID in a generation: 1 to 64
// letters, digits, '-' or '_' (cluster IDs are 32 hex digits).
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ErrSuperseded means this server's cluster state was restored elsewhere
// (a newer generation of its lineage exists) or a sibling restore of the
// same backup already answered the caller: the server stopped serving for
// good (Unavailable: the caller should use the cluster that replaced it).
var ErrSuperseded = fmt.Errorf("%w: this server's cluster was replaced by a restore (a newer generation serves elsewhere)", ErrNotServing)
