package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// The raise budget (DESIGN.md §5, "A restore's floor"). From protocol 5 a
// raise carries its leader's wall time (KindRaiseAt), and every replica
// holds each section's rise to a rate: a section keeps a budget time B
// (µs since the Unix epoch; in the budget bucket), and a raise by Δ at time
// s is applied only if max(B, s-RaiseWindow) <= s+RaiseWindow, which then
// becomes B + cost(Δ) (cost(Δ) = Δ/RaiseRatePerUs µs, rounded up). B never
// falls, and every raise moves it by at least its cost, so between any two
// states of a section its mark rose by at most RaiseRatePerUs·(B₂ - B₁);
// and B stays within RaiseWindow plus one raise's cost of the newest time
// stamped. A restore therefore bounds every value the old cluster can have
// handed out after a backup from the backup and the time alone
// (RestoreFloor), with nothing for an operator to count.
//
// Stamps never go back: a leader stamps the later of its wall clock and
// the newest stamp applied (RaiseClockMs), so a leader whose clock is
// behind does not find its sections' budgets ahead of it.
const (
	// RaiseRatePerUs is the most values a section's mark may rise per
	// microsecond on average: 4,096 (about 4.1·10⁹ a second, far above
	// what a section is ever asked for: a server hands out some 10⁵ values
	// a second in all).
	RaiseRatePerUs = 4096
	// RaiseWindow is how far a section's budget may run ahead of, or lag
	// behind, the raise's time: a section idle for long may rise by
	// 2·RaiseWindow's worth at once.
	RaiseWindow = 10 * time.Second
	// MaxRaise is the most one raise entry may raise one section by
	// (a raise to a call's last value plus a step: steps are at most
	// seqd.MaxStep, 2^40).
	MaxRaise = 1 << 42
)

// ErrRateLimited means a raise would make a section's mark rise faster than
// the budget allows (see above).
var ErrRateLimited = fmt.Errorf("%w: a section's high-water mark would rise faster than %d values a second", seqd.ErrRateLimited, uint64(RaiseRatePerUs)*1_000_000)

// ErrRaiseTooLarge means one raise entry raises a section by more than
// MaxRaise.
var ErrRaiseTooLarge = fmt.Errorf("%w: one raise of a section is above %d", seqd.ErrExhausted, uint64(MaxRaise))

// bucketBudget (format 5) holds, per space and section, the section's
// budget time in µs (see above), as the marks bucket holds its mark.
var bucketBudget = []byte("budget")

// keyRaiseClock (in meta, format 5) is the newest raise stamp applied, in
// µs.
var keyRaiseClock = []byte("raise-clock")

// raiseCost is how far a raise by delta moves a section's budget, in µs.
func raiseCost(delta uint64) int64 {
	return int64((delta + RaiseRatePerUs - 1) / RaiseRatePerUs)
}

// EncodeRaiseAt encodes a raise stamped with its leader's wall time, in
// Unix ms (KindRaiseAt, protocol 5).
//
// Layout: 0x07, uvarint nowMs, then the raise's layout after its kind byte.
func EncodeRaiseAt(nowMs int64, marks []seqd.Mark) []byte {
	r := EncodeRaise(marks)
	b := make([]byte, 0, len(r)+binary.MaxVarintLen64)
	b = append(b, byte(KindRaiseAt))
	b = binary.AppendUvarint(b, uint64(max(nowMs, 0)))
	return append(b, r[1:]...)
}

// RaiseClockMs is the newest raise stamp applied, in Unix ms (0: none): a
// leader stamps no earlier (see above).
func (f *FSM) RaiseClockMs() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.raiseClock / 1000
}

// checkBudget reports whether raising every section of pending at stamp
// nowUs (µs) keeps within its budget, and returns the new budget times. It
// reads the budget bucket; nothing is written. With charge, nothing is
// refused: the times are what the raise costs, debt or not.
func (f *FSM) checkBudget(pending []seqd.Mark, nowUs int64, charge bool) ([]int64, error) {
	w := RaiseWindow.Microseconds()
	out := make([]int64, len(pending))
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if f.db == nil {
		return nil, f.broken
	}
	err := f.db.View(func(tx *bolt.Tx) error {
		bb := tx.Bucket(bucketBudget)
		f.mu.RLock()
		defer f.mu.RUnlock()
		for i, m := range pending {
			// The section's mark as Max reads it: a base or a restore's
			// floor counts (a section first raised after a restore starts
			// there, not at 0).
			cur := max(f.marks[m.Space][m.Section], f.bases[m.Space], f.ext.floor)
			var delta uint64
			if m.Max > cur {
				delta = m.Max - cur
			}
			if delta > MaxRaise && !charge {
				return fmt.Errorf("%w: section %d of %q by %d", ErrRaiseTooLarge, m.Section, m.Space, delta)
			}
			var b int64
			if bb != nil {
				if sb := bb.Bucket([]byte(m.Space)); sb != nil {
					if v := sb.Get(u64(m.Section)); len(v) == 8 {
						b = int64(binary.BigEndian.Uint64(v))
					}
				}
			}
			start := max(b, nowUs-w)
			if start > nowUs+w && !charge {
				return fmt.Errorf("%w (section %d of %q)", ErrRateLimited, m.Section, m.Space)
			}
			out[i] = start + raiseCost(delta)
		}
		return nil
	})
	return out, err
}

// putBudgets writes the budget times of pending (see checkBudget) and the
// raise clock.
func putBudgets(tx *bolt.Tx, pending []seqd.Mark, budgets []int64, clockUs int64) error {
	root, err := tx.CreateBucketIfNotExists(bucketBudget)
	if err != nil {
		return err
	}
	var (
		b     *bolt.Bucket
		bname string
	)
	for i, m := range pending {
		if b == nil || bname != m.Space {
			if b, err = root.CreateBucketIfNotExists([]byte(m.Space)); err != nil {
				return err
			}
			bname = m.Space
		}
		if err := b.Put(u64(m.Section), u64(uint64(budgets[i]))); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketMeta).Put(keyRaiseClock, u64(uint64(clockUs))); err != nil {
		return err
	}
	return setFormat(tx, generationFormat)
}

// loadBudget checks the budget bucket: per space a bucket of 8-byte
// sections to 8-byte times, for spaces that exist, in a file of format 5.
func loadBudget(tx *bolt.Tx, st *state) error {
	root := tx.Bucket(bucketBudget)
	if root == nil {
		return nil
	}
	if st.format < generationFormat {
		return fmt.Errorf("meta: a raise budget in a file that says format %d", st.format)
	}
	return root.ForEach(func(k, v []byte) error {
		if v != nil {
			return fmt.Errorf("budget: %q is not a bucket", k)
		}
		if _, ok := st.spaces[string(k)]; !ok {
			return fmt.Errorf("budget: bucket %q has no space", k)
		}
		return root.Bucket(k).ForEach(func(sk, sv []byte) error {
			if len(sk) != 8 || len(sv) != 8 || binary.BigEndian.Uint64(sv) > math.MaxInt64 {
				return fmt.Errorf("budget/%s: malformed entry", k)
			}
			return nil
		})
	})
}

// PromiseProtocol makes this state's file unreadable to builds that do not
// speak protocol p: from protocol 5, its data format becomes
// generationFormat, which builds of protocol 4 and older refuse ("written
// by a newer seqd"). A server does this before it tells a leader that it
// speaks p for a move (cluster.Node.ProtocolConfirmed), and the leader
// before it moves: once the move commits, a server started again on an
// older build would take part in a group whose entries it cannot follow
// (it stops on the first stamped raise, and its own raises are not held to
// the budget), so such a build must not open its data. The format is only
// a mark (no state changes, nothing replicated); a snapshot installed
// later, in this process or after a restart (raft installs its latest at
// every start), keeps it (Restore never lowers a file's format), and a file
// older builds already refused is left as it is. p below 5 needs no mark.
// Protocol 6 (space record versions,
// whose entries builds of protocol 5 stop on) marks the file
// versionFormat, which builds of protocol 5 refuse.
func (f *FSM) PromiseProtocol(p uint64) error {
	if p < budgetProtocol || f.promised.Load() >= p {
		return nil // marked already: Restore keeps the mark
	}
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if err := f.markPromisedLocked(p); err != nil {
		return err
	}
	f.promised.Store(p)
	return nil
}

// promisedFormat is the data format that marks a promise of protocol p.
func promisedFormat(p uint64) uint64 {
	if p >= versionProtocol {
		return versionFormat
	}
	return generationFormat
}

// markPromisedLocked marks the file for a promise of protocol p
// (PromiseProtocol); dbMu is held.
func (f *FSM) markPromisedLocked(p uint64) error {
	if f.db == nil {
		return f.broken
	}
	return f.db.Update(func(tx *bolt.Tx) error { return setFormat(tx, promisedFormat(p)) })
}

// budgetUnstamped charges an unstamped raise on protocol 5 or later to its
// sections' budgets at the raise clock clockUs (the newest stamp applied:
// the entry has no time of its own), refusing nothing (see applyRaise), and
// logs it once per term: only a leader of an older build writes one after
// the move to 5 (or this build's, for a raise proposed just before it), and
// a restore's floor (TimeMargin) covers its rise only as far as the budget
// would have.
func (f *FSM) budgetUnstamped(l *raft.Log, pending []seqd.Mark, clockUs int64) []int64 {
	if f.unstampedTerm != l.Term {
		f.unstampedTerm = l.Term
		f.logger.Warn("fsm: an unstamped raise on protocol 5 or later, applied outside the raise budget: a server of an older build leads (a downgrade); replace it with this build",
			"index", l.Index, "term", l.Term)
	}
	budgets, err := f.checkBudget(pending, clockUs, true)
	if err != nil {
		// Only a closed file fails here; the write that follows reports it.
		return nil
	}
	return budgets
}

// DefaultClockError is the error a restore allows, by default, in every
// wall clock involved: each leader's that stamped raises, and the
// restoring machine's (see TimeMargin).
const DefaultClockError = 10 * time.Minute

// ErrClockBeforeBackup means the restoring machine's clock reads earlier
// than the backup was taken (allowing for the clock error).
var ErrClockBeforeBackup = errors.New("fsm: this machine's clock reads earlier than the backup was taken")

// TimeMargin is the restore margin that covers every value a cluster can
// have handed out after a backup taken at taken (its earliest part's
// leader's wall time), for a restore at now (this machine's wall clock),
// when every raise since was held to the raise budget (Budgeted), with
// every wall clock within clockErr of true time.
//
// Why it is enough. Take a section with mark m in the backup. Its budget
// time after the backup starts at max(B, s-W) >= s-W for the first raise
// stamped s >= taken-2·clockErr (the stamp is at most clockErr behind true
// time, and the backup's time at most clockErr ahead), and ends at most
// W + MaxRaise's cost after the last stamp, which is at most clockErr
// ahead of true time, itself before now+clockErr. The mark rises by at
// most RaiseRatePerUs for each µs its budget moves, so it ends at most
//
//	m + RaiseRatePerUs·((now - taken) + 4·clockErr + 2·W) + MaxRaise
//
// and every value handed out is at or below its section's mark. A section
// the backup never raised starts at its space's base or the floor, which
// the margin raises the same way (a space created after the backup starts
// at 0: the floor covers it).
func TimeMargin(taken, now time.Time, clockErr time.Duration) (uint64, error) {
	if now.Before(taken.Add(-clockErr)) {
		return 0, fmt.Errorf("%w (%s, the backup %s)", ErrClockBeforeBackup, now.UTC().Format(time.RFC3339), taken.UTC().Format(time.RFC3339))
	}
	us := now.Sub(taken).Microseconds() + 4*clockErr.Microseconds() + 2*RaiseWindow.Microseconds()
	if us < 0 {
		us = 0
	}
	if uint64(us) > (math.MaxInt64-MaxRaise)/RaiseRatePerUs {
		return 0, ErrMarginTooLarge
	}
	return uint64(us)*RaiseRatePerUs + MaxRaise, nil
}

// Budgeted reports whether every raise after the backup was held to the
// raise budget: every group's part was on protocol 5 or later when it was
// taken (a leader of this build stamps every raise of such a group). Then
// TimeMargin bounds what the cluster handed out since, short of a server of
// an older build leading after the move (see budgetUnstamped).
func (s RestoreSummary) Budgeted() bool {
	if len(s.Info.Parts) == 0 {
		return s.Protocol >= budgetProtocol
	}
	for _, p := range s.Info.Parts {
		if p.Protocol < budgetProtocol {
			return false
		}
	}
	return true
}

// Earliest is when the backup's earliest part was taken.
func (s RestoreSummary) Earliest() time.Time {
	t := s.Info.Taken
	for _, p := range s.Info.Parts {
		if p.Taken.Before(t) {
			t = p.Taken
		}
	}
	return t
}
