package fsm

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
)

// ---- helpers ----

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openTest(t testing.TB) (*FSM, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fsm.db")
	f, err := Open(path, quietLogger())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, path
}

// applier hands out increasing raft indices.
type applier struct {
	t     testing.TB
	f     *FSM
	index uint64
}

func respErr(t *testing.T, resp interface{}) error {
	t.Helper()
	if resp == nil {
		return nil
	}
	err, ok := resp.(error)
	if !ok {
		t.Fatalf("Apply response %T is not an error", resp)
	}
	return err
}

// dump is a comparable picture of the whole FSM state.
type dump struct {
	Spaces []seqd.Space
	Marks  map[string]map[uint64]uint64
}

func dumpState(f *FSM) dump {
	d := dump{Spaces: f.Spaces(), Marks: map[string]map[uint64]uint64{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for name, m := range f.marks {
		c := map[uint64]uint64{}
		for k, v := range m {
			c[k] = v
		}
		d.Marks[name] = c
	}
	return d
}

// bufSink is a raft.SnapshotSink backed by a bytes.Buffer.
type bufSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func persist(t *testing.T, snap raft.FSMSnapshot) []byte {
	t.Helper()
	defer snap.Release()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v, want closed only", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return persist(t, snap)
}

// encode re-encodes a decoded command.
func encode(c Command) []byte {
	switch c.Kind {
	case KindCreateSpace:
		return EncodeCreateSpace(c.Space)
	case KindRaise:
		return EncodeRaise(c.Marks)
	case KindNoop:
		return EncodeNoop()
	case KindServerSeen:
		return EncodeServerSeen(c.Server, c.Index)
	case KindCluster:
		return EncodeClusterGroups(c.ClusterID, c.Protocol, c.Groups)
	case KindLease:
		return EncodeLease(c.Lease, c.LeaseMargin)
	case KindFlake:
		return EncodeFlake(c.NowMs, c.Flake)
	case KindRelease:
		return EncodeRelease()
	case KindUpdateSpace:
		return EncodeUpdateSpace(c.Space.Name, c.Space.Step)
	case KindDeleteSpace:
		return EncodeDeleteSpace(c.Space.Name)
	case KindDeleteNamespace:
		return EncodeDeleteNamespace(c.Namespace)
	case KindFollowSpace:
		return EncodeFollowSpace(SpaceRecord{Space: c.Space, Version: c.Version})
	}
	panic(fmt.Sprintf("unknown kind %d", c.Kind))
}

// ---- codec ----
