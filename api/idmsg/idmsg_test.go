package idmsg

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// TestLayoutRoundTrip: every preset, with each obfuscation a namespace may
// have, reads back as it was written; a layout with fields travels under
// ObfuscationFields (so that clients that predate the fields refuse it) and
// reads back unobfuscated.
func TestLayoutRoundTrip(t *testing.T) {
	for _, name := range flake.PresetNames() {
		l, _ := flake.Preset(name)
		for _, obf := range []string{flake.ObfuscateNone, flake.ObfuscateFF1, flake.ObfuscateFF1Hour} {
			if flake.ValidateNamespace("n", l, obf) != nil {
				continue
			}
			m := LayoutMsg(l, obf)
			if !l.Plain() && m.GetObfuscation() != ObfuscationFields {
				t.Errorf("%s: a layout with fields travels with obfuscation %q, want %q", name, m.GetObfuscation(), ObfuscationFields)
			}
			if l.Plain() && m.GetObfuscation() != obf {
				t.Errorf("%s: obfuscation %q travels as %q", name, obf, m.GetObfuscation())
			}
			got, gotObf := Layout(m)
			if got != l || gotObf != obf {
				t.Errorf("%s/%q: read back as %v/%q", name, obf, got, gotObf)
			}
		}
	}
	// A plain layout's message never counts stray field values.
	l, _ := flake.Preset("snowflake")
	m := LayoutMsg(l, flake.ObfuscateNone)
	m.ShardBits, m.SequenceFirst = 5, true
	if got, _ := Layout(m); got != l {
		t.Errorf("stray fields counted: %v", got)
	}
}

// TestGrantAndNamespaceRoundTrip: a grant and a namespace read back as
// they were written (the namespace's floor is a time for people only).
func TestGrantAndNamespaceRoundTrip(t *testing.T) {
	l, _ := flake.Preset("instagram")
	g := flake.Grant{Namespace: "n", Layout: l, Worker: 7, Token: 3, Lo: 100, Hi: 200, LeaderMs: 1234, LeaseMs: 10000}
	if got := Grant(GrantMsg(g, flake.ObfuscateNone)); got != g {
		t.Errorf("grant read back as %+v, want %+v", got, g)
	}
	ns := flake.Namespace{Name: "n", Layout: l, KeyCheck: "", Floor: 42}
	m := NamespaceMsg(ns)
	if m.GetFloorUnixMs() != l.UnitStart(42) || m.GetEndUnixMs() != l.End() {
		t.Errorf("namespace message floor %d end %d", m.GetFloorUnixMs(), m.GetEndUnixMs())
	}
	ns.Floor = 0
	if got := Namespace(m); got != ns {
		t.Errorf("namespace read back as %+v, want %+v", got, ns)
	}
}

// TestHolderError: the codes a holder acts on become the root package's
// errors; others stay as they are.
func TestHolderError(t *testing.T) {
	if err := HolderError(connect.NewError(connect.CodeFailedPrecondition, errors.New("x"))); !errors.Is(err, seqd.ErrFenced) {
		t.Errorf("failed_precondition: %v", err)
	}
	if err := HolderError(connect.NewError(connect.CodeResourceExhausted, errors.New("x"))); !errors.Is(err, seqd.ErrNoWorker) {
		t.Errorf("resource_exhausted: %v", err)
	}
	un := connect.NewError(connect.CodeUnavailable, errors.New("x"))
	if err := HolderError(un); err != un {
		t.Errorf("unavailable changed: %v", err)
	}
	if HolderError(nil) != nil {
		t.Error("nil became an error")
	}
}
