package fsm

import (
	"strconv"
	"strings"

	"github.com/seqd/seqd/flake"
)

// How a namespace that builds before layout fields cannot express travels
// in the log and in the file: a layout with a shard or a cluster field or
// the sequence above the worker (flake.Layout.Plain is false), or a
// deleted namespace.
//
// Such a namespace is written as the obfuscated namespace ("ff1") of its
// time, worker and sequence widths whose key check is "x:" followed by
// what the widths leave out. A build that knows the fields reads them
// back. A build that does not reads an obfuscated namespace whose key
// check no cluster secret derives: it creates it, grants its workers and
// keeps its floors exactly as this build does (the worker table is the
// same), so no replica diverges in a rolling upgrade, and it refuses to
// issue or decode its ids (a key check it cannot derive), so it never
// issues ids in a shape the namespace does not have. Its embedded
// generators, and those of clients that predate the fields, refuse
// obfuscated layouts too. The file format does not change.
//
// The extension is canonical (fields in a fixed order, no defaults
// written), so that a decoded command re-encodes to the same bytes; a key
// check after "x:" that is not canonical is kept as it is, an obfuscated
// namespace no secret serves, as a build without the fields would keep it.

// extPrefix starts a key check that carries layout fields.
const extPrefix = "x:"

// wireExt is a namespace's part that rides in the key check.
type wireExt struct {
	deleted       bool
	clusterBits   uint8
	cluster       uint64
	shardBits     uint8
	sequenceFirst bool
	// obfuscation and keyCheck of a deleted obfuscated namespace.
	obfuscation, keyCheck string
}

// toWire returns the layout, obfuscation and key check a namespace is
// written with (see above).
func toWire(l flake.Layout, obfuscation, keyCheck string, deleted bool) (flake.Layout, string, string) {
	if l.Plain() && !deleted {
		return l, obfuscation, keyCheck
	}
	e := wireExt{deleted: deleted, clusterBits: l.ClusterBits, cluster: l.Cluster, shardBits: l.ShardBits,
		sequenceFirst: l.SequenceFirst, obfuscation: obfuscation, keyCheck: keyCheck}
	base := flake.Layout{EpochMs: l.EpochMs, UnitMs: l.UnitMs, TimeBits: l.TimeBits, WorkerBits: l.WorkerBits, SequenceBits: l.SequenceBits}
	return base, flake.ObfuscateFF1, e.String()
}

// fromWire undoes toWire. A key check that does not parse is kept as it
// is (an obfuscated namespace no secret serves).
func fromWire(base flake.Layout, obfuscation, keyCheck string) (l flake.Layout, obf, check string, deleted bool) {
	if obfuscation != flake.ObfuscateFF1 || !strings.HasPrefix(keyCheck, extPrefix) {
		return base, obfuscation, keyCheck, false
	}
	e, ok := parseExt(keyCheck)
	if !ok || !base.Plain() {
		return base, obfuscation, keyCheck, false
	}
	l = base
	l.ClusterBits, l.Cluster, l.ShardBits, l.SequenceFirst = e.clusterBits, e.cluster, e.shardBits, e.sequenceFirst
	return l, e.obfuscation, e.keyCheck, e.deleted
}

// String is the canonical key check: "x:" then, comma-separated and in
// this order, "d" (deleted), "c<bits>.<value>", "s<bits>", "q" (sequence
// first), "o<obfuscation>" and "k<key check>" (of a deleted obfuscated
// namespace); fields at their zero value are left out.
func (e wireExt) String() string {
	var f []string
	if e.deleted {
		f = append(f, "d")
	}
	if e.clusterBits != 0 {
		f = append(f, "c"+strconv.Itoa(int(e.clusterBits))+"."+strconv.FormatUint(e.cluster, 10))
	}
	if e.shardBits != 0 {
		f = append(f, "s"+strconv.Itoa(int(e.shardBits)))
	}
	if e.sequenceFirst {
		f = append(f, "q")
	}
	if e.obfuscation != "" {
		f = append(f, "o"+e.obfuscation)
	}
	if e.keyCheck != "" {
		f = append(f, "k"+e.keyCheck)
	}
	return extPrefix + strings.Join(f, ",")
}

// parseExt parses a canonical extension; ok is false for anything else.
func parseExt(s string) (wireExt, bool) {
	var e wireExt
	for _, f := range strings.Split(strings.TrimPrefix(s, extPrefix), ",") {
		if f == "" {
			return e, false
		}
		switch f[0] {
		case 'd':
			e.deleted = f == "d"
		case 'c':
			bits, val, ok := strings.Cut(f[1:], ".")
			b, err1 := strconv.ParseUint(bits, 10, 8)
			v, err2 := strconv.ParseUint(val, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return e, false
			}
			e.clusterBits, e.cluster = uint8(b), v
		case 's':
			b, err := strconv.ParseUint(f[1:], 10, 8)
			if err != nil {
				return e, false
			}
			e.shardBits = uint8(b)
		case 'q':
			e.sequenceFirst = f == "q"
		case 'o':
			e.obfuscation = f[1:]
		case 'k':
			e.keyCheck = f[1:]
		default:
			return e, false
		}
	}
	// Canonical only: what String writes for e, and nothing that could
	// stand for a plain layout.
	return e, e.String() == s && (e.deleted || e.clusterBits != 0 || e.shardBits != 0 || e.sequenceFirst) &&
		(e.deleted || (e.obfuscation == "" && e.keyCheck == ""))
}
