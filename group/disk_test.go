package group

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

type nopHost struct{ Host }

func (nopHost) LogWrite(error) {}

// The log store notes every write that stores a lease renewal (KindLease,
// or the no-op that protocol 1 and the first release renew with), and only
// those: a new leader counts its lease wait from the last one (see lead).
func TestDiskStoreNotesLeaseRenewals(t *testing.T) {
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(t.TempDir(), "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	stored := 0
	ds := diskStore{BoltStore: ls, host: nopHost{}, leaseStored: func() { stored++ }}
	entry := func(i uint64, typ raft.LogType, data []byte) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: typ, Data: data}
	}
	for _, c := range []struct {
		logs []*raft.Log
		want int
	}{
		{[]*raft.Log{entry(1, raft.LogCommand, fsm.EncodeCreateSpace(seqd.DefaultSpace))}, 0},
		{[]*raft.Log{entry(2, raft.LogConfiguration, []byte{byte(fsm.KindLease)})}, 0},
		{[]*raft.Log{entry(3, raft.LogCommand, fsm.EncodeNoop())}, 1},
		{[]*raft.Log{entry(4, raft.LogCommand, fsm.EncodeRaise([]seqd.Mark{{Space: "default", Section: 1, Max: 9}})), entry(5, raft.LogCommand, fsm.EncodeLease(time.Second, time.Millisecond))}, 2},
	} {
		if err := ds.StoreLogs(c.logs); err != nil {
			t.Fatal(err)
		}
		if stored != c.want {
			t.Fatalf("after storing %d entries from index %d: %d lease notes, want %d", len(c.logs), c.logs[0].Index, stored, c.want)
		}
	}
	if err := ds.StoreLog(entry(6, raft.LogCommand, fsm.EncodeLease(time.Second, time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if stored != 3 {
		t.Fatalf("StoreLog of a renewal: %d lease notes, want 3", stored)
	}
}

// A term write that finds the store closed (a heartbeat answered as the
// group closes) never returns: returning its error would make raft stop the
// process, and returning success would acknowledge an unsaved term. A write
// on an open store returns at once.
func TestDiskStoreTermWriteAfterCloseParks(t *testing.T) {
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(t.TempDir(), "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	ds := diskStore{BoltStore: ls, host: nopHost{}}
	if err := ds.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	ls.Close()
	done := make(chan error, 1)
	go func() { done <- ds.SetUint64([]byte("CurrentTerm"), 3) }()
	select {
	case err := <-done:
		t.Fatalf("a term write on a closed store returned %v", err)
	case <-time.After(300 * time.Millisecond):
	}
}
