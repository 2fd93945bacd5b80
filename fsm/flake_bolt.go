package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd/flake"
)

// The flake bucket (format 3): a sub-bucket per namespace, named by it,
// holding the namespace record under keyFlakeNS and one record per worker
// under the worker's 8-byte big-endian id; and the restore's time floor
// under keyFlakeFloor. Namespace names never start with a zero byte, so
// the keys cannot meet a namespace's name.
var (
	bucketFlake   = []byte("flake")
	keyFlakeNS    = []byte("\x00ns")
	keyFlakeFloor = []byte("\x00floor")
)

// flakeFormat is the data format of a file that holds flake state: the
// builds before it refuse such a file (and such a snapshot) as written by a
// newer seqd rather than misreading it.
const flakeFormat = 3

// setFormat raises the file's data format to at least n.
func setFormat(tx *bolt.Tx, n uint64) error {
	m := tx.Bucket(bucketMeta)
	if v := m.Get(keyFormat); len(v) == 8 && binary.BigEndian.Uint64(v) >= n {
		return nil
	}
	return m.Put(keyFormat, u64(n))
}

// persist writes the namespaces and workers the command changed.
func (t *flakeTxn) persist(tx *bolt.Tx) error {
	root, err := tx.CreateBucketIfNotExists(bucketFlake)
	if err != nil {
		return err
	}
	if t.floorMs > 0 {
		if err := root.Put(keyFlakeFloor, u64(uint64(t.floorMs))); err != nil {
			return err
		}
	}
	for name, n := range t.touched {
		b, err := root.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		if err := b.Put(keyFlakeNS, encodeNamespace(n.ns, n.deleted)); err != nil {
			return err
		}
		for id := range t.dirtyWks[name] {
			if err := b.Put(u64(id), encodeWorker(n.workers[id])); err != nil {
				return err
			}
		}
	}
	return setFormat(tx, flakeFormat)
}

// Record layouts (uvarints and length-prefixed strings, decoded strictly):
// namespace: epoch ms, unit ms, time bits, worker bits, sequence bits,
// obfuscation, key check, floor; worker: hwm, token, holder, label, lease
// ms, renewed ms, renewed index, history count, then per use: label,
// token, lo, hi.

// encodeNamespace writes a namespace's record; a layout with fields beyond
// time, worker and sequence, and a deletion, ride in the key check (see
// flake_wire.go).
func encodeNamespace(ns flake.Namespace, deleted bool) []byte {
	l, obf, check := toWire(ns.Layout, ns.Obfuscation, ns.KeyCheck, deleted)
	b := binary.AppendUvarint(nil, uint64(l.EpochMs))
	b = binary.AppendUvarint(b, uint64(l.UnitMs))
	b = append(b, l.TimeBits, l.WorkerBits, l.SequenceBits)
	b = appendString(b, obf)
	b = appendString(b, check)
	return binary.AppendUvarint(b, ns.Floor)
}

func decodeNamespace(name string, v []byte) (flake.Namespace, bool, error) {
	ns, err := decodeWireNamespace(name, v)
	if err != nil {
		return ns, false, err
	}
	var deleted bool
	ns.Layout, ns.Obfuscation, ns.KeyCheck, deleted = fromWire(ns.Layout, ns.Obfuscation, ns.KeyCheck)
	return ns, deleted, flake.ValidateNamespace(name, ns.Layout, ns.Obfuscation)
}

// decodeWireNamespace decodes a record as builds before layout fields
// wrote it, and validates it as they do.
func decodeWireNamespace(name string, v []byte) (flake.Namespace, error) {
	d := decoder{b: v}
	ns := flake.Namespace{Name: name}
	ns.Layout.EpochMs = int64(d.uvarint("epoch"))
	unit := d.uvarint("unit")
	ns.Layout.UnitMs = uint32(min(unit, 1<<32-1))
	ns.Layout.TimeBits, ns.Layout.WorkerBits, ns.Layout.SequenceBits = d.byte("time bits"), d.byte("worker bits"), d.byte("sequence bits")
	ns.Obfuscation = d.string("obfuscation")
	ns.KeyCheck = d.string("key check")
	ns.Floor = d.uvarint("floor")
	if d.err == nil && d.remaining() != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return ns, d.err
	}
	if unit > 1<<32-1 {
		return ns, fmt.Errorf("unit %d ms", unit)
	}
	if err := ns.Layout.Validate(); err == nil && ns.Floor > ns.Layout.MaxUnit() {
		return ns, fmt.Errorf("floor %d past the layout's last unit %d", ns.Floor, ns.Layout.MaxUnit())
	}
	return ns, flake.ValidateNamespace(name, ns.Layout, ns.Obfuscation)
}

func encodeWorker(w Worker) []byte {
	b := binary.AppendUvarint(nil, w.HWM)
	b = binary.AppendUvarint(b, w.Token)
	b = appendString(b, w.Holder)
	b = appendString(b, w.Label)
	b = binary.AppendUvarint(b, w.LeaseMs)
	b = binary.AppendUvarint(b, uint64(w.RenewedMs))
	b = binary.AppendUvarint(b, w.RenewedIndex)
	b = binary.AppendUvarint(b, uint64(len(w.History)))
	for _, u := range w.History {
		b = appendString(b, u.Label)
		b = binary.AppendUvarint(b, u.Token)
		b = binary.AppendUvarint(b, u.Lo)
		b = binary.AppendUvarint(b, u.Hi)
	}
	return b
}

func decodeWorker(id uint64, v []byte) (Worker, error) {
	d := decoder{b: v}
	w := Worker{ID: id}
	w.HWM, w.Token = d.uvarint("hwm"), d.uvarint("token")
	w.Holder, w.Label = d.string("holder"), d.string("label")
	w.LeaseMs, w.RenewedMs, w.RenewedIndex = d.uvarint("lease"), int64(d.uvarint("renewed")), d.uvarint("renewed index")
	n := d.uvarint("history count")
	if d.err == nil && n > historyLen {
		d.fail(fmt.Errorf("history of %d uses", n))
	}
	for i := uint64(0); d.err == nil && i < n; i++ {
		w.History = append(w.History, Use{Label: d.string("use label"), Token: d.uvarint("use token"), Lo: d.uvarint("use lo"), Hi: d.uvarint("use hi")})
	}
	if d.err == nil && d.remaining() != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", d.remaining()))
	}
	return w, d.err
}

// loadFlake reads and validates the flake bucket, if there is one.
func loadFlake(tx *bolt.Tx) (flakeState, error) {
	st := flakeState{spaces: map[string]*flakeNS{}}
	root := tx.Bucket(bucketFlake)
	if root == nil {
		return st, nil
	}
	err := root.ForEach(func(k, v []byte) error {
		if string(k) == string(keyFlakeFloor) {
			if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
				return errors.New("flake: bad time floor")
			}
			st.floorMs = int64(binary.BigEndian.Uint64(v))
			return nil
		}
		if v != nil {
			return fmt.Errorf("flake: %q is not a bucket", k)
		}
		name := string(k)
		b := root.Bucket(k)
		ns, deleted, err := decodeNamespace(name, b.Get(keyFlakeNS))
		if err != nil {
			return fmt.Errorf("flake: namespace %q: %w", name, err)
		}
		n := &flakeNS{ns: ns, deleted: deleted, workers: map[uint64]Worker{}}
		if err := b.ForEach(func(wk, wv []byte) error {
			if string(wk) == string(keyFlakeNS) {
				return nil
			}
			if len(wk) != 8 || wv == nil {
				return fmt.Errorf("bad worker key %x", wk)
			}
			id := binary.BigEndian.Uint64(wk)
			if id >= ns.Layout.Workers() {
				return fmt.Errorf("worker %d of %d", id, ns.Layout.Workers())
			}
			w, err := decodeWorker(id, wv)
			if err != nil {
				return fmt.Errorf("worker %d: %w", id, err)
			}
			if w.HWM > ns.Layout.MaxUnit() {
				return fmt.Errorf("worker %d: hwm %d past the layout's last unit %d", id, w.HWM, ns.Layout.MaxUnit())
			}
			n.workers[id] = w
			return nil
		}); err != nil {
			return fmt.Errorf("flake: namespace %q: %w", name, err)
		}
		for id := range uint64(len(n.workers)) {
			if _, ok := n.workers[id]; !ok {
				return fmt.Errorf("flake: namespace %q: workers are not 0 to %d", name, len(n.workers)-1)
			}
		}
		st.spaces[name] = n
		return nil
	})
	return st, err
}

// highestGrantMs is the end (Unix ms) of the highest time any worker or
// floor of any namespace reached.
func (s *flakeState) highestGrantMs() int64 {
	h := s.floorMs
	for _, n := range s.spaces {
		top := n.ns.Floor
		for _, w := range n.workers {
			top = max(top, w.HWM)
		}
		h = max(h, n.ns.Layout.UnitStart(top+1))
	}
	return h
}

// restoreFlake prepares a backup's flake state for a new cluster: the time
// floor goes under every namespace, and the old cluster's holders are
// dropped (their fencing tokens rise, so a stale holder is refused even if
// it reached the new cluster).
func restoreFlake(tx *bolt.Tx, floorMs int64) error {
	if floorMs <= 0 {
		return nil // PrepareRestore refused this for a backup with flake state
	}
	// The floor is written even without flake state: the old cluster may
	// have created namespaces after the backup, and the restored one must
	// not grant below what those handed out.
	root, err := tx.CreateBucketIfNotExists(bucketFlake)
	if err != nil {
		return err
	}
	if err := root.Put(keyFlakeFloor, u64(uint64(floorMs))); err != nil {
		return err
	}
	st, err := loadFlake(tx)
	if err != nil {
		return err
	}
	for name, n := range st.spaces {
		b := root.Bucket([]byte(name))
		for id, w := range n.workers {
			if w.Holder == "" {
				continue
			}
			w.Holder = ""
			w.Token++
			if err := b.Put(u64(id), encodeWorker(w)); err != nil {
				return err
			}
		}
	}
	return setFormat(tx, flakeFormat)
}
