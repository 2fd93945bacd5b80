package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

func TestDeleteNamespaceCodec(t *testing.T) {
	data := EncodeDeleteNamespace("orders")
	c, err := Decode(data)
	if err != nil || !reflect.DeepEqual(c, Command{Kind: KindDeleteNamespace, Namespace: "orders"}) {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
	if !bytes.Equal(encode(c), data) {
		t.Fatalf("re-encoded %x", encode(c))
	}
	for _, bad := range [][]byte{{byte(KindDeleteNamespace)}, append(EncodeDeleteNamespace("n"), 0), {byte(KindDeleteNamespace), 3, 'a'}} {
		if c, err := Decode(bad); err == nil {
			t.Errorf("Decode(%x) = %+v, want an error", bad, c)
		}
	}
}

// TestDeleteNamespace: a deleted namespace is gone from reads and refuses
// every op but a create; its holders are fenced; a create with another
// layout is refused, and one with the same layout brings it back with its
// workers' marks, so that its next grants start above every id issued
// before the delete. All of it survives a reopen and a snapshot.
func TestDeleteNamespace(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	two := snowflake()
	two.WorkerBits = 1 // two workers: the second grant after the create reuses the first's
	mustFlake(t, a.flake(t0, create("orders", two), create("other", snowflake())))
	g := a.grant(t0, acquire("orders", "h1"))
	g = a.grant(t0+10, renew(g, "h1"))
	if err := respErr(t, a.apply(EncodeDeleteNamespace("nope"))); !errors.Is(err, seqd.ErrUnknownNamespace) {
		t.Fatalf("deleting an unknown namespace: %v", err)
	}
	a.mustOK(EncodeDeleteNamespace("orders"))
	a.mustOK(EncodeDeleteNamespace("orders")) // again: nothing to do
	if _, ok := f.Namespace("orders"); ok {
		t.Fatal("a deleted namespace is found")
	}
	if _, ok := f.Workers("orders"); ok {
		t.Fatal("a deleted namespace's workers are listed")
	}
	if ns := f.Namespaces(); len(ns) != 1 || ns[0].Name != "other" {
		t.Fatalf("Namespaces() = %+v", ns)
	}
	for _, c := range []struct {
		op   FlakeOp
		want error
	}{
		{acquire("orders", "h2"), seqd.ErrUnknownNamespace},
		{FlakeOp{Type: OpReclaim, Namespace: "orders"}, seqd.ErrUnknownNamespace},
		// Its holders are fenced: they stop, and acquire anew.
		{renew(g, "h1"), seqd.ErrFenced},
		{FlakeOp{Type: OpRelease, Namespace: "orders", Worker: g.Worker, Token: g.Token, Holder: "h1"}, seqd.ErrFenced},
	} {
		if r := a.flake(t0+20, c.op); !errors.Is(r[0].Err, c.want) {
			t.Fatalf("op %d on a deleted namespace: %v, want %v", c.op.Type, r[0].Err, c.want)
		}
	}
	son, _ := flake.Preset("sonyflake")
	if r := a.flake(t0+20, create("orders", son)); !errors.Is(r[0].Err, seqd.ErrNamespaceExists) {
		t.Fatalf("creating a deleted namespace with another layout: %v", r[0].Err)
	}
	check := func(x *FSM, where string) {
		t.Helper()
		if _, ok := x.Namespace("orders"); ok {
			t.Fatalf("%s: the deleted namespace is found", where)
		}
	}
	snap := snapshotBytes(t, f)
	other, _ := openTest(t)
	if err := other.Restore(nopCloser{bytes.NewBuffer(snap)}); err != nil {
		t.Fatal(err)
	}
	check(other, "installed snapshot")
	_ = f.Close()
	re, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	check(re, "reopened")
	b := &applier{t: t, f: re, index: a.index}
	// Back, with the same layout: the old holder stays fenced, and a new
	// grant of the worker it held starts at or above its last range.
	mustFlake(t, b.flake(t0-5000, create("orders", two))) // the leader's clock went back meanwhile
	ws := must(re.Workers("orders"))
	if len(ws) != 1 || ws[0].Holder != ReclaimedHolder || ws[0].Token != g.Token+1 || ws[0].HWM != g.Hi {
		t.Fatalf("workers after the create: %+v (grant %+v)", ws, g)
	}
	if r := b.flake(t0+30, renew(g, "h1")); !errors.Is(r[0].Err, seqd.ErrFenced) {
		t.Fatalf("the old holder renews after the delete: %v", r[0].Err)
	}
	if fresh := b.grant(t0+30, acquire("orders", "h3")); fresh.Worker == g.Worker {
		t.Fatalf("a worker fenced by the delete was handed out without a permit: %+v", fresh)
	}
	ng := b.grant(t0+30, FlakeOp{Type: OpAcquire, Namespace: "orders", Holder: "h4", Span: 1000, LeaseMs: 3000,
		Permits: []Permit{{Worker: ws[0].ID, Token: ws[0].Token, RenewedIndex: ws[0].RenewedIndex}}})
	if ng.Worker != g.Worker || ng.Lo < g.Hi {
		t.Fatalf("the worker's new range %+v starts below its old one's end %d", ng, g.Hi)
	}
}

// TestDeleteNamespaceSkippedByAnOlderBuild: a replica that skips the
// deletion keeps the same workers' marks, so whichever build leads next
// grants ranges above the same marks; it only lists the namespace.
func TestDeleteNamespaceSkippedByAnOlderBuild(t *testing.T) {
	run := func() (*FSM, flake.Grant) {
		f, _ := openTest(t)
		a := &applier{t: t, f: f}
		mustFlake(t, a.flake(t0, create("orders", snowflake())))
		g := a.grant(t0, acquire("orders", "h1"))
		a.mustOK(EncodeDeleteNamespace("orders"))
		return f, g
	}
	now, g := run()
	withoutKinds(t, KindDeleteNamespace)
	older, _ := run()
	if _, ok := older.Namespace("orders"); !ok {
		t.Fatal("the older replica does not list the namespace it never deleted")
	}
	a, b := must(older.Workers("orders")), now.flake.spaces["orders"].workers
	if len(a) != 1 || a[0].HWM != b[0].HWM || a[0].HWM != g.Hi {
		t.Fatalf("worker marks differ: %+v here, %+v on the older replica", b, a)
	}
}
