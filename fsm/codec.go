package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/seqd/seqd"
)

// EncodeCluster encodes a command that names the cluster (the first such
// entry wins: a cluster's ID never changes once set) and raises its
// replicated-command protocol to protocol.
//
// Layout: 0x05, uvarint protocol, uvarint len(id), id.
func EncodeCluster(id string, protocol uint64) []byte {
	return EncodeClusterGroups(id, protocol, 1)
}

// EncodeClusterGroups is EncodeCluster for a cluster of groups raft
// groups: from protocol 4 on, the entry records the group count, which
// then never changes (protocols before 4 record none: one group).
//
// Layout: 0x05, uvarint protocol, uvarint len(id), id[, uvarint groups
// from protocol 4].
func EncodeClusterGroups(id string, protocol uint64, groups int) []byte {
	b := binary.AppendUvarint([]byte{byte(KindCluster)}, protocol)
	b = appendString(b, id)
	if protocol >= groupsProtocol {
		b = binary.AppendUvarint(b, uint64(max(groups, 0)))
	}
	return b
}

// EncodeLease encodes a lease renewal: a no-op that records the lease
// length and margin of the leader that renews with it. A new leader waits
// out the longest lease any earlier leader may still hold (see
// FSM.LeaseRecord); the renewal entry a leader's lease rests on carries
// that leader's own lease, so the last one applied names the lease that
// may still run.
//
// Layout: 0x06, uvarint lease in nanoseconds, uvarint margin in nanoseconds.
func EncodeLease(lease, margin time.Duration) []byte {
	b := binary.AppendUvarint([]byte{byte(KindLease)}, uint64(max(lease, 0)))
	return binary.AppendUvarint(b, uint64(max(margin, 0)))
}

// EncodeRelease encodes a leader's release of its lease (KindRelease).
//
// Layout: 0x82.
func EncodeRelease() []byte { return []byte{byte(KindRelease)} }

// IsRenewal reports whether data, a raft log entry's data, is an entry a
// leader renews its lease with, without decoding the rest of it: KindLease,
// or KindNoop, which leaders on protocol 1 (and the first release, in a
// cluster of mixed builds) renew with and nothing else writes.
func IsRenewal(data []byte) bool {
	return len(data) > 0 && (Kind(data[0]) == KindLease || Kind(data[0]) == KindNoop)
}

// EncodeServerSeen encodes a command recording that server id has held raft
// state (so it has voted or taken entries), with its raft log reaching at
// least index. A server in the configuration that later shows up without
// state was wiped, and one whose log ends below the recorded index runs on
// an older copy of its data; neither may vote until it is removed and added
// again.
//
// Layout: 0x04, uvarint len(id), id, uvarint index.
func EncodeServerSeen(id string, index uint64) []byte {
	b := appendString([]byte{byte(KindServerSeen)}, id)
	return binary.AppendUvarint(b, index)
}

// EncodeCreateSpace encodes a command that creates space s. It does not
// validate s; Apply answers an invalid space with ErrInvalidSpace.
//
// Layout: 0x01, uvarint len(name), name, uvarint step, uvarint section_size.
func EncodeCreateSpace(s seqd.Space) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64*3+len(s.Name))
	b = append(b, byte(KindCreateSpace))
	b = appendString(b, s.Name)
	b = binary.AppendUvarint(b, s.Step)
	b = binary.AppendUvarint(b, s.SectionSize)
	return b
}

// EncodeRaise encodes a command that raises the high-water mark of several
// sections, possibly of several spaces, at once.
//
// Layout: 0x02, uvarint count, then count times: uvarint len(space), space,
// uvarint section, uvarint max.
func EncodeRaise(marks []seqd.Mark) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, m := range marks {
		n += len(m.Space) + binary.MaxVarintLen64*3
	}
	b := make([]byte, 0, n)
	b = append(b, byte(KindRaise))
	b = binary.AppendUvarint(b, uint64(len(marks)))
	for _, m := range marks {
		b = appendString(b, m.Space)
		b = binary.AppendUvarint(b, m.Section)
		b = binary.AppendUvarint(b, m.Max)
	}
	return b
}

// EncodeNoop encodes a command that changes no state. The leader uses it to
// renew its lease.
//
// Layout: 0x03.
func EncodeNoop() []byte {
	return []byte{byte(KindNoop)}
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// minMarkLen is the smallest possible encoding of one Mark: an empty name's
// length byte, one byte of section and one byte of max.
const minMarkLen = 3

// Decode decodes a command produced by one of the Encode functions. It is strict: an empty input, an unknown type byte, truncated
// data, an overlong or non-minimal uvarint, a length or count larger than the
// remaining input can hold, and trailing bytes are all errors. Consequently
// every successfully decoded command of a known kind re-encodes to exactly
// the input bytes. A command of an unknown kind with the KindIgnorable bit
// decodes to a Command with only Kind set, whatever follows the kind byte.
// Decode checks only the format; whether a space is valid is decided by Apply.
func Decode(b []byte) (Command, error) {
	if len(b) == 0 {
		return Command{}, errors.New("fsm: decode: empty command")
	}
	d := decoder{b: b, off: 1}
	var c Command
	switch k := Kind(b[0]); k {
	case KindCreateSpace:
		c.Kind = k
		c.Space.Name = d.string("space name")
		c.Space.Step = d.uvarint("step")
		c.Space.SectionSize = d.uvarint("section size")
	case KindRaise, KindRaiseAt:
		c.Kind = k
		if k == KindRaiseAt {
			ms := d.uvarint("raise time")
			if d.err == nil && ms > math.MaxInt64 {
				d.fail(errors.New("raise time overflows"))
			}
			c.NowMs = int64(ms)
		}
		n := d.uvarint("mark count")
		if d.err == nil && n > uint64(d.remaining()/minMarkLen) {
			d.fail(fmt.Errorf("mark count %d exceeds what %d remaining bytes can hold", n, d.remaining()))
		}
		if d.err == nil && n > 0 {
			c.Marks = make([]seqd.Mark, n)
			for i := range c.Marks {
				c.Marks[i].Space = d.string("mark space")
				c.Marks[i].Section = d.uvarint("mark section")
				c.Marks[i].Max = d.uvarint("mark max")
				if d.err != nil {
					break
				}
			}
		}
	case KindNoop:
		c.Kind = k
	case KindServerSeen:
		c.Kind = k
		c.Server = d.string("server id")
		c.Index = d.uvarint("server index")
	case KindCluster:
		c.Kind = k
		c.Protocol = d.uvarint("protocol")
		c.ClusterID = d.string("cluster id")
		if d.err == nil && (len(c.ClusterID) == 0 || len(c.ClusterID) > maxClusterIDLen) {
			d.fail(fmt.Errorf("cluster id of %d bytes (want 1 to %d)", len(c.ClusterID), maxClusterIDLen))
		}
		if d.err == nil && c.Protocol >= groupsProtocol {
			g := d.uvarint("groups")
			if d.err == nil && (g < 1 || g > seqd.MaxGroups) {
				d.fail(fmt.Errorf("group count %d (want 1 to %d)", g, seqd.MaxGroups))
			}
			c.Groups = int(g)
		}
	case KindFlake:
		c.Kind = k
		d.flake(&c)
	case KindRelease:
		c.Kind = k
	case KindUpdateSpace:
		c.Kind = k
		d.updateSpace(&c)
	case KindDeleteSpace:
		c.Kind = k
		d.deleteSpace(&c)
	case KindFollowSpace:
		c.Kind = k
		d.followSpace(&c)
	case KindDeleteNamespace:
		c.Kind = k
		c.Namespace = d.string("namespace")
	case KindLease:
		c.Kind = k
		l, m := d.uvarint("lease"), d.uvarint("lease margin")
		if d.err == nil && (l > math.MaxInt64 || m > math.MaxInt64) {
			d.fail(errors.New("lease or margin overflows a duration"))
		}
		c.Lease, c.LeaseMargin = time.Duration(l), time.Duration(m)
	default:
		if k&KindIgnorable != 0 {
			// A later build's command that this one may skip.
			return Command{Kind: k}, nil
		}
		return Command{}, fmt.Errorf("fsm: decode: unknown command type 0x%02x", b[0])
	}
	if d.err == nil && d.remaining() != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return Command{}, fmt.Errorf("fsm: decode: command type %d: %w", b[0], d.err)
	}
	return c, nil
}

// decoder reads fields sequentially and remembers the first error; after an
// error every read returns the zero value.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.fail(fmt.Errorf("%s: truncated at offset %d", what, d.off))
		return 0
	case n < 0:
		d.fail(fmt.Errorf("%s: uvarint overflows 64 bits at offset %d", what, d.off))
		return 0
	case n != uvarintLen(v):
		d.fail(fmt.Errorf("%s: non-minimal uvarint at offset %d", what, d.off))
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 1 {
		d.fail(fmt.Errorf("%s: truncated at offset %d", what, d.off))
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) string(what string) string {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return ""
	}
	if n > uint64(d.remaining()) {
		d.fail(fmt.Errorf("%s: length %d exceeds %d remaining bytes", what, n, d.remaining()))
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
