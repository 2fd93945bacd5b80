package group

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/seqd/seqd/fsm"
)

// diskStore wraps raft's bolt store (log and stable store) so that the host
// sees every write's outcome (Host.LogWrite) and notices a full disk; see
// cluster/disk.go for what a server does then.
type diskStore struct {
	*raftboltdb.BoltStore
	host Host
	// leaseStored, if not nil, is called after a write that stored a lease
	// renewal entry (fsm.IsRenewal; see Group.lead).
	leaseStored func()
}

func (s diskStore) observe(err error) error {
	s.host.LogWrite(err)
	return err
}

// StoreLog implements raft.LogStore.
func (s diskStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore.
func (s diskStore) StoreLogs(ls []*raft.Log) error {
	err := s.observe(s.BoltStore.StoreLogs(ls))
	if err == nil && s.leaseStored != nil {
		for _, l := range ls {
			if l.Type == raft.LogCommand && fsm.IsRenewal(l.Data) {
				s.leaseStored()
				break
			}
		}
	}
	return err
}

// Set implements raft.StableStore, retrying while the disk is full.
func (s diskStore) Set(k, v []byte) error {
	return s.retry(func() error { return s.BoltStore.Set(k, v) })
}

// SetUint64 implements raft.StableStore, retrying while the disk is full.
func (s diskStore) SetUint64(k []byte, v uint64) error {
	return s.retry(func() error { return s.BoltStore.SetUint64(k, v) })
}

// retry runs a stable-store write until it does not fail for a full disk.
// raft stops the process when it cannot save its term; waiting instead
// stalls raft on this server until there is room.
//
// A write that finds the store closed never returns: hashicorp/raft
// answers heartbeats on the transport's goroutine, which checks that raft
// is running and then saves the term, so a heartbeat arriving as the group
// closes can reach a store closed after raft stopped. raft would stop the
// process on the error; answering success would acknowledge a term it
// never saved. The goroutine stays parked (its peer times out) while the
// process goes on closing.
func (s diskStore) retry(write func() error) error {
	pause := 50 * time.Millisecond
	for {
		err := write()
		if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
			select {}
		}
		if err == nil || !fsm.IsDiskFull(err) {
			return s.observe(err)
		}
		s.observe(err)
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Second)
	}
}
