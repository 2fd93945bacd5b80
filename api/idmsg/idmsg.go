package idmsg

import (
	"fmt"
	"math"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/flake"
)

// ObfuscationFields is GetLayoutResponse.obfuscation for a layout with
// fields beyond time, worker and sequence (see id.proto): not obfuscated,
// and refused by clients that predate the fields, which check only this.
// It is a word of the wire, never a namespace's setting.
const ObfuscationFields = "fields"

// LayoutMsg is the GetLayoutResponse of a layout and its obfuscation.
func LayoutMsg(l flake.Layout, obfuscation string) *seqv1.GetLayoutResponse {
	m := &seqv1.GetLayoutResponse{EpochUnixMs: l.EpochMs, UnitMs: l.UnitMs, TimeBits: uint32(l.TimeBits),
		WorkerBits: uint32(l.WorkerBits), SequenceBits: uint32(l.SequenceBits), Obfuscation: obfuscation,
		ShardBits: uint32(l.ShardBits), ClusterBits: uint32(l.ClusterBits), Cluster: l.Cluster, SequenceFirst: l.SequenceFirst}
	if !l.Plain() {
		m.Obfuscation = ObfuscationFields
	}
	return m
}

// Layout reads a layout and its obfuscation (flake.ObfuscateNone for none):
// the layout fields count only where the obfuscation says
// ObfuscationFields, and the obfuscation is then none.
func Layout(m *seqv1.GetLayoutResponse) (flake.Layout, string) {
	l := flake.Layout{EpochMs: m.GetEpochUnixMs(), UnitMs: m.GetUnitMs(), TimeBits: uint8(min(m.GetTimeBits(), 255)),
		WorkerBits: uint8(min(m.GetWorkerBits(), 255)), SequenceBits: uint8(min(m.GetSequenceBits(), 255))}
	if m.GetObfuscation() != ObfuscationFields {
		return l, m.GetObfuscation()
	}
	l.ShardBits, l.ClusterBits = uint8(min(m.GetShardBits(), 255)), uint8(min(m.GetClusterBits(), 255))
	l.Cluster, l.SequenceFirst = m.GetCluster(), m.GetSequenceFirst()
	return l, flake.ObfuscateNone
}

// NamespaceMsg is a namespace as ListNamespaces and CreateNamespace answer
// it.
func NamespaceMsg(ns flake.Namespace) *seqv1.Namespace {
	return &seqv1.Namespace{Name: ns.Name, Layout: LayoutMsg(ns.Layout, ns.Obfuscation), FloorUnixMs: ns.Layout.UnitStart(ns.Floor),
		EndUnixMs: ns.Layout.End(), KeyCheck: ns.KeyCheck}
}

// Namespace reads a namespace message: its name, layout, obfuscation and
// key check (the floor it carries is a time for people, not read back).
func Namespace(m *seqv1.Namespace) flake.Namespace {
	l, obf := Layout(m.GetLayout())
	return flake.Namespace{Name: m.GetName(), Layout: l, Obfuscation: obf, KeyCheck: m.GetKeyCheck()}
}

// GrantMsg is the WorkerGrant of a grant of a namespace with the given
// obfuscation.
func GrantMsg(g flake.Grant, obfuscation string) *seqv1.WorkerGrant {
	return &seqv1.WorkerGrant{Namespace: g.Namespace, Worker: uint32(g.Worker), Token: g.Token, Lo: g.Lo, Hi: g.Hi,
		LeaderUnixMs: g.LeaderMs, LeaseMs: g.LeaseMs, Layout: LayoutMsg(g.Layout, obfuscation)}
}

// Grant reads a WorkerGrant. The layout is the one its ids are composed in
// (an obfuscated namespace's before the permutation); a holder refuses a
// grant of another layout than its namespace's.
func Grant(m *seqv1.WorkerGrant) flake.Grant {
	l, _ := Layout(m.GetLayout())
	return flake.Grant{Namespace: m.GetNamespace(), Layout: l, Worker: uint64(m.GetWorker()),
		Token: m.GetToken(), Lo: m.GetLo(), Hi: m.GetHi(), LeaderMs: m.GetLeaderUnixMs(), LeaseMs: m.GetLeaseMs()}
}

// RunsMsg is runs of ids as NextIdsResponse.runs carries them.
func RunsMsg(runs []flake.Run) []*seqv1.IdRun {
	out := make([]*seqv1.IdRun, len(runs))
	for i, r := range runs {
		out[i] = &seqv1.IdRun{First: r.First, Count: uint32(r.Count)}
	}
	return out
}

// Runs returns a NextIds answer's ids as runs, in whichever form the
// server sent them: as runs, or one by one (an obfuscated namespace, or a
// server older than runs), merged where consecutive. It checks that they
// are count ids, all positive, and, given as runs, strictly increasing (an
// obfuscated namespace's ids, given one by one, are in no order).
func Runs(resp *seqv1.NextIdsResponse, count uint32) ([]flake.Run, error) {
	var runs []flake.Run
	got := 0
	if len(resp.GetRuns()) > 0 {
		runs = make([]flake.Run, 0, len(resp.GetRuns()))
		last := int64(0)
		for _, r := range resp.GetRuns() {
			first, n := r.GetFirst(), int64(r.GetCount())
			if n == 0 || int64(got)+n > int64(count) || first <= last || first > math.MaxInt64-n+1 {
				return nil, fmt.Errorf("client: server returned an invalid run of ids (first %d, count %d, after %d)", first, n, last)
			}
			runs = append(runs, flake.Run{First: first, Count: int(n)})
			got += int(n)
			last = first + n - 1
		}
	} else {
		for _, id := range resp.GetIds() {
			if id <= 0 {
				return nil, fmt.Errorf("client: server returned id %d", id)
			}
			if k := len(runs) - 1; k >= 0 && runs[k].Last()+1 == id {
				runs[k].Count++
			} else {
				runs = append(runs, flake.Run{First: id, Count: 1})
			}
		}
		got = len(resp.GetIds())
	}
	if got != int(count) {
		return nil, fmt.Errorf("client: server returned %d ids for %d", got, count)
	}
	return runs, nil
}

// HolderError turns the Connect codes a holder acts on back into the root
// package's errors: failed_precondition is seqd.ErrFenced (the grant was
// taken back) and resource_exhausted seqd.ErrNoWorker; anything else is
// kept as it is.
func HolderError(err error) error {
	switch connect.CodeOf(err) {
	case connect.CodeFailedPrecondition:
		return fmt.Errorf("%w: %v", seqd.ErrFenced, err)
	case connect.CodeResourceExhausted:
		return fmt.Errorf("%w: %v", seqd.ErrNoWorker, err)
	}
	return err
}
