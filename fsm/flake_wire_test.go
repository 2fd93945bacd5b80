package fsm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/seqd/seqd/flake"
)

// TestWireLayoutFields: a namespace whose layout has fields beyond time,
// worker and sequence travels as the obfuscated namespace of its widths,
// with the fields in the key check (what a build without them reads), and
// comes back whole; the bytes re-encode exactly.
func TestWireLayoutFields(t *testing.T) {
	ig, _ := flake.Preset("instagram")
	son, _ := flake.Preset("sonyflake")
	dc := snowflake()
	dc.WorkerBits, dc.ClusterBits, dc.Cluster = 7, 3, 6
	for name, c := range map[string]struct {
		l     flake.Layout
		check string
	}{
		"instagram": {ig, "x:s13"},
		"sonyflake": {son, "x:q"},
		"cluster":   {dc, "x:c3.6"},
	} {
		op := FlakeOp{Type: OpCreateNamespace, Namespace: "n", Layout: c.l}
		data := EncodeFlake(t0, []FlakeOp{op})
		if !bytes.Contains(data, append([]byte{3}, "ff1"...)) {
			t.Fatalf("%s: the wire form is not an ff1 namespace: %q", name, data)
		}
		if !bytes.Contains(data, []byte(c.check)) {
			t.Fatalf("%s: key check %q not in %q", name, c.check, data)
		}
		dec, err := Decode(data)
		if err != nil || !reflect.DeepEqual(dec.Flake, []FlakeOp{op}) {
			t.Fatalf("%s: Decode = %+v, %v", name, dec.Flake, err)
		}
		if re := encode(dec); !bytes.Equal(re, data) {
			t.Fatalf("%s: re-encoded %x, want %x", name, re, data)
		}
		// What a build without the fields reads: a valid obfuscated
		// namespace of the widths, whose key check no secret derives.
		base, obf, check := toWire(c.l, "", "", false)
		if err := flake.ValidateNamespace("n", base, obf); err != nil || !base.Plain() || check != c.check || len(check) > MaxHolderLen {
			t.Fatalf("%s: wire form %+v %q %q: %v", name, base, obf, check, err)
		}
		if base.TimeBits != c.l.TimeBits || base.WorkerBits != c.l.WorkerBits || base.Workers() != c.l.Workers() {
			t.Fatalf("%s: the wire form's worker table differs: %+v", name, base)
		}
	}
	// A key check after "x:" that is not canonical stays as it is: an
	// obfuscated namespace that no secret serves, as older builds keep it.
	for _, odd := range []string{"x:", "x:s13,s13", "x:q,s13", "x:s013", "x:z", "x:c3", "x:okff1"} {
		op := FlakeOp{Type: OpCreateNamespace, Namespace: "n", Layout: snowflake(), Obfuscation: flake.ObfuscateFF1, KeyCheck: odd}
		data := EncodeFlake(t0, []FlakeOp{op})
		dec, err := Decode(data)
		if err != nil || !reflect.DeepEqual(dec.Flake, []FlakeOp{op}) || !bytes.Equal(encode(dec), data) {
			t.Fatalf("%q: Decode = %+v, %v", odd, dec.Flake, err)
		}
	}
}

// TestLayoutFieldsNamespace: a namespace with a shard field is created,
// granted and kept (reopen, snapshot) with its fields; it cannot be
// obfuscated (ValidateNamespace, which the leader checks a create with).
func TestLayoutFieldsNamespace(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	ig, _ := flake.Preset("instagram")
	mustFlake(t, a.flake(t0, create("photos", ig)))
	g := a.grant(t0, acquire("photos", "h"))
	if g.Worker != 0 || g.Lo != ig.Unit(t0) {
		t.Fatalf("grant %+v", g)
	}
	if err := flake.ValidateNamespace("secret", ig, flake.ObfuscateFF1); err == nil || !strings.Contains(err.Error(), "cannot be obfuscated") {
		t.Fatalf("an obfuscated layout with a shard field: %v", err)
	}
	snap := snapshotBytes(t, f)
	_ = f.Close()
	re, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	other, _ := openTest(t)
	if err := other.Restore(nopCloser{bytes.NewBuffer(snap)}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*FSM{re, other} {
		ns, ok := x.Namespace("photos")
		if !ok || ns.Layout != ig || ns.Obfuscation != "" || ns.KeyCheck != "" {
			t.Fatalf("namespace after reopen or restore: %+v, %v", ns, ok)
		}
	}
}
