package fsm

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// ---- helpers ----

// TestClusterAndLeaseRecords: the first cluster ID applied wins, the
// protocol only rises, a lease record is kept as the last one applied, and
// all of it survives a reopen and a snapshot, with the file marked format 2
// once it holds them.
func TestClusterAndLeaseRecords(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	if f.ClusterID() != "" || f.Protocol() != 1 {
		t.Fatalf("a new FSM: cluster %q protocol %d", f.ClusterID(), f.Protocol())
	}
	if _, ok := f.LeaseRecord(); ok {
		t.Fatal("a new FSM has a lease record")
	}
	a.mustOK(EncodeCluster("first", 2))
	a.mustOK(EncodeCluster("second", 2))
	if err, ok := f.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: EncodeCluster("third", 1)}).(error); !ok || err == nil {
		t.Fatal("a move to protocol 1 was accepted")
	}
	if f.ClusterID() != "first" || f.Protocol() != 2 {
		t.Fatalf("cluster %q protocol %d, want first 2", f.ClusterID(), f.Protocol())
	}
	a.mustOK(EncodeLease(4*time.Second, 400*time.Millisecond))
	a.mustOK(EncodeLease(100*time.Millisecond, 50*time.Millisecond))
	want := LeaseRecord{Lease: 100 * time.Millisecond, Margin: 50 * time.Millisecond}
	if rec, ok := f.LeaseRecord(); !ok || rec != want {
		t.Fatalf("lease record %+v %v, want %+v", rec, ok, want)
	}
	var snap bytes.Buffer
	if _, err := f.Backup(&snap); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if got := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyFormat)); got != 2 {
			t.Errorf("a file with a cluster ID and a lease record says format %d, want 2", got)
		}
		return nil
	})
	db.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if rec, _ := g.LeaseRecord(); g.ClusterID() != "first" || g.Protocol() != 2 || rec != want {
		t.Fatalf("after reopen: cluster %q protocol %d lease %+v", g.ClusterID(), g.Protocol(), rec)
	}
	h, _ := openTest(t)
	if err := h.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.LeaseRecord(); h.ClusterID() != "first" || rec != want {
		t.Fatalf("after a snapshot: cluster %q lease %+v", h.ClusterID(), rec)
	}
}

// A release is the last lease entry until a renewal follows it; it is
// forgotten when a snapshot is installed and when the state machine is
// opened again (memory only: a new leader then waits, as it always may).
func TestLeaseReleased(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	if f.LeaseReleased() {
		t.Fatal("released before any entry")
	}
	a.mustOK(EncodeCreateSpace(seqd.DefaultSpace))
	a.mustOK(EncodeLease(time.Second, 100*time.Millisecond))
	a.mustOK(EncodeRelease())
	if !f.LeaseReleased() {
		t.Fatal("not released after a release")
	}
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "default", Section: 0, Max: 5}}))
	if !f.LeaseReleased() {
		t.Fatal("a raise cleared the release")
	}
	a.mustOK(EncodeLease(time.Second, 100*time.Millisecond))
	if f.LeaseReleased() {
		t.Fatal("still released after a renewal")
	}
	a.mustOK(EncodeRelease())
	data := snapshotBytes(t, f)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if f.LeaseReleased() {
		t.Fatal("released after a snapshot install")
	}
	a.mustOK(EncodeRelease())
	f.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.LeaseReleased() {
		t.Fatal("released after reopening")
	}
	if c, err := Decode(EncodeRelease()); err != nil || c.Kind != KindRelease {
		t.Fatalf("Decode(EncodeRelease()) = %v, %v", c, err)
	}
}

// From protocol 4 the cluster entry records the raft group count: the first
// count applied wins, an entry with another count is refused, the count
// survives a reopen and a snapshot, and entries of earlier protocols
// record none (one group). A build of protocol 3 cannot decode the entry
// (trailing bytes), so it stops rather than serve from the state.
func TestClusterRecordsGroups(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCluster("c", 3))
	if n, ok := f.Groups(); ok || n != 1 {
		t.Fatalf("protocol 3: groups %d recorded %v, want 1 unrecorded", n, ok)
	}
	a.mustOK(EncodeClusterGroups("c", 4, 6))
	if n, ok := f.Groups(); !ok || n != 6 {
		t.Fatalf("after protocol 4 with 6 groups: %d %v", n, ok)
	}
	a.mustOK(EncodeClusterGroups("c", 4, 6)) // the same again: fine
	if err := respErr(t, a.apply(EncodeClusterGroups("c", 4, 2))); err == nil || !strings.Contains(err.Error(), "runs 6 raft groups") {
		t.Fatalf("another count: %v, want a refusal", err)
	}
	if c, err := Decode(EncodeClusterGroups("c", 4, 6)); err != nil || c.Groups != 6 || c.Protocol != 4 {
		t.Fatalf("decode: %+v %v", c, err)
	}
	if _, err := Decode(EncodeClusterGroups("c", 4, 0)); err == nil {
		t.Fatal("a count of 0 decoded")
	}
	// What a protocol 3 decoder sees: the protocol 3 layout plus a byte.
	if _, err := Decode(append(EncodeCluster("c", 3), 6)); err == nil {
		t.Fatal("a protocol 3 entry with a trailing count decoded")
	}
	data := snapshotBytes(t, f)
	f.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n, ok := g.Groups(); !ok || n != 6 {
		t.Fatalf("after reopening: %d %v", n, ok)
	}
	h, _ := openTest(t)
	if err := h.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if n, ok := h.Groups(); !ok || n != 6 {
		t.Fatalf("after a snapshot install: %d %v", n, ok)
	}
}

// The state machine applies lease.Handoff to the log with raft's entry
// terms: a release counts only after a renewal of its own term, and any
// renewal after it (a lease entry, or protocol 1's no-op) voids it.
func TestReleaseCertifiesOnlyItsOwnTerm(t *testing.T) {
	f, _ := openTest(t)
	var index uint64
	at := func(term uint64, data []byte) {
		t.Helper()
		index++
		if resp := f.Apply(&raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data}); resp != nil {
			t.Fatalf("Apply: %v", resp)
		}
	}
	at(5, EncodeLease(time.Second, 100*time.Millisecond))
	at(6, EncodeRelease())
	if f.LeaseReleased() {
		t.Fatal("a release of term 6 after a renewal of term 5 counted: its leader never served in its term")
	}
	if !f.RenewedIn(5) || f.RenewedIn(6) {
		t.Fatal("RenewedIn does not name term 5 only")
	}
	at(7, EncodeLease(time.Second, 100*time.Millisecond))
	at(7, EncodeRelease())
	if !f.LeaseReleased() {
		t.Fatal("a release after a renewal of its own term did not count")
	}
	at(8, EncodeNoop())
	if f.LeaseReleased() {
		t.Fatal("a no-op renewal after the release did not void it")
	}
}
