package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// maxFlakeOps bounds the operations of one KindFlake command.
const maxFlakeOps = 4096

// EncodeFlake encodes a command of flake operations (namespaces and
// workers), batched into one entry, with the leader's time nowMs (Unix ms)
// at which they are decided: Apply never reads a clock.
//
// Layout: 0x81, uvarint nowMs, uvarint count, then count times a type byte
// and the op's fields (see FlakeOp): create: string namespace, uvarint
// epoch ms, uvarint unit ms, three bit-width bytes, string obfuscation,
// string key check (a layout with fields beyond time, worker and sequence
// carries them in the key check: see flake_wire.go);
// acquire: string namespace, string holder, string label, uvarint span,
// uvarint lease ms, uvarint permit count, then per permit uvarint worker,
// token and renewed index; renew: string namespace, uvarint worker, uvarint token,
// string holder, uvarint span, uvarint lease ms; release: string namespace,
// uvarint worker, uvarint token, string holder; reclaim: string namespace,
// uvarint worker; floor: uvarint floor ms.
func EncodeFlake(nowMs int64, ops []FlakeOp) []byte {
	b := binary.AppendUvarint([]byte{byte(KindFlake)}, uint64(max(nowMs, 0)))
	b = binary.AppendUvarint(b, uint64(len(ops)))
	for _, op := range ops {
		b = append(b, byte(op.Type))
		switch op.Type {
		case OpCreateNamespace:
			// A layout with fields that builds before them cannot
			// express travels in the key check (see flake_wire.go).
			l, obf, check := toWire(op.Layout, op.Obfuscation, op.KeyCheck, false)
			b = appendString(b, op.Namespace)
			b = binary.AppendUvarint(b, uint64(max(l.EpochMs, 0)))
			b = binary.AppendUvarint(b, uint64(l.UnitMs))
			b = append(b, l.TimeBits, l.WorkerBits, l.SequenceBits)
			b = appendString(b, obf)
			b = appendString(b, check)
		case OpAcquire:
			b = appendString(b, op.Namespace)
			b = appendString(b, op.Holder)
			b = appendString(b, op.Label)
			b = binary.AppendUvarint(b, op.Span)
			b = binary.AppendUvarint(b, op.LeaseMs)
			b = binary.AppendUvarint(b, uint64(len(op.Permits)))
			for _, p := range op.Permits {
				b = binary.AppendUvarint(b, p.Worker)
				b = binary.AppendUvarint(b, p.Token)
				b = binary.AppendUvarint(b, p.RenewedIndex)
			}
		case OpRenew:
			b = appendString(b, op.Namespace)
			b = binary.AppendUvarint(b, op.Worker)
			b = binary.AppendUvarint(b, op.Token)
			b = appendString(b, op.Holder)
			b = binary.AppendUvarint(b, op.Span)
			b = binary.AppendUvarint(b, op.LeaseMs)
		case OpRelease:
			b = appendString(b, op.Namespace)
			b = binary.AppendUvarint(b, op.Worker)
			b = binary.AppendUvarint(b, op.Token)
			b = appendString(b, op.Holder)
		case OpReclaim:
			b = appendString(b, op.Namespace)
			b = binary.AppendUvarint(b, op.Worker)
		case OpFloor:
			b = binary.AppendUvarint(b, uint64(max(op.FloorMs, 0)))
		}
	}
	return b
}

// decodeFlake decodes the body of a KindFlake command into c.
func (d *decoder) flake(c *Command) {
	now := d.uvarint("now")
	n := d.uvarint("op count")
	if d.err == nil && (now > math.MaxInt64 || n > maxFlakeOps || n > uint64(d.remaining())) {
		d.fail(fmt.Errorf("now %d or op count %d out of range", now, n))
	}
	c.NowMs = int64(now)
	for i := uint64(0); d.err == nil && i < n; i++ {
		op := FlakeOp{Type: OpType(d.byte("op type"))}
		switch op.Type {
		case OpCreateNamespace:
			op.Namespace = d.string("namespace")
			epoch, unit := d.uvarint("epoch"), d.uvarint("unit")
			if d.err == nil && (epoch > math.MaxInt64 || unit > math.MaxUint32) {
				d.fail(fmt.Errorf("epoch %d or unit %d out of range", epoch, unit))
			}
			op.Layout.EpochMs, op.Layout.UnitMs = int64(epoch), uint32(unit)
			op.Layout.TimeBits, op.Layout.WorkerBits, op.Layout.SequenceBits = d.byte("time bits"), d.byte("worker bits"), d.byte("sequence bits")
			op.Obfuscation = d.string("obfuscation")
			op.KeyCheck = d.string("key check")
			if l, obf, check, deleted := fromWire(op.Layout, op.Obfuscation, op.KeyCheck); !deleted {
				op.Layout, op.Obfuscation, op.KeyCheck = l, obf, check
			}
		case OpAcquire:
			op.Namespace, op.Holder, op.Label = d.string("namespace"), d.string("holder"), d.string("label")
			op.Span, op.LeaseMs = d.uvarint("span"), d.uvarint("lease")
			np := d.uvarint("permit count")
			if d.err == nil && np > uint64(d.remaining()/3) {
				d.fail(fmt.Errorf("permit count %d exceeds the remaining bytes", np))
			}
			for j := uint64(0); d.err == nil && j < np; j++ {
				op.Permits = append(op.Permits, Permit{Worker: d.uvarint("permit worker"), Token: d.uvarint("permit token"), RenewedIndex: d.uvarint("permit index")})
			}
		case OpRenew:
			op.Namespace = d.string("namespace")
			op.Worker, op.Token = d.uvarint("worker"), d.uvarint("token")
			op.Holder = d.string("holder")
			op.Span, op.LeaseMs = d.uvarint("span"), d.uvarint("lease")
		case OpRelease:
			op.Namespace = d.string("namespace")
			op.Worker, op.Token = d.uvarint("worker"), d.uvarint("token")
			op.Holder = d.string("holder")
		case OpReclaim:
			op.Namespace = d.string("namespace")
			op.Worker = d.uvarint("worker")
		case OpFloor:
			f := d.uvarint("floor")
			if d.err == nil && f > math.MaxInt64 {
				d.fail(fmt.Errorf("floor %d out of range", f))
			}
			op.FloorMs = int64(f)
		default:
			d.fail(fmt.Errorf("unknown flake op %d", op.Type))
		}
		c.Flake = append(c.Flake, op)
	}
}
