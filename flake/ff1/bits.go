package ff1

import (
	"crypto/cipher"
	"encoding/binary"
	"sync"
)

// Bits is FF1 with radix 2 on n-bit integers, 20 <= n <= 64: a keyed
// permutation of [0, 2^n). The integer x stands for the string of n
// numerals whose numeral i is bit n-1-i of x (most significant bit first),
// so Bits gives bit-for-bit the result of a Cipher with radix 2 on that
// string.
//
// With radix 2 and n <= 64 every quantity of the algorithm fits in a
// uint64: v = n - floor(n/2) <= 32, so NUM(B) takes b = ceil(v/8) <= 4
// bytes and S takes d = 8 bytes, and y mod 2^m is a masked sum. Bits
// therefore needs neither math/big nor heap allocations, and the PRF on
// the fixed block P is precomputed for short tweaks.
//
// A Bits holds no mutable state and is safe for concurrent use.
type Bits struct {
	block  cipher.Block
	n, v   uint
	b      int    // byte length of NUM(B)
	mask   uint64 // 2^n - 1
	maskU  uint64 // 2^u - 1
	maskV  uint64 // 2^v - 1
	p      [16]byte
	cached [cachedTweak + 1][16]byte // CIPH(P) for tweak lengths 0..cachedTweak
}

// cachedTweak is the longest tweak for which NewBits precomputes CIPH(P);
// a longer tweak costs one more AES call per Encrypt or Decrypt.
const cachedTweak = 32

// scratch holds the 16-byte blocks handed to cipher.Block.Encrypt, which
// would escape to the heap if they were locals (the call is through an
// interface).
var scratch = sync.Pool{New: func() any { return new([16]byte) }}

// NewBits returns the permutation of the n-bit integers given by FF1 with
// radix 2 and n numerals, keyed by key (16, 24 or 32 bytes). n must be in
// [20, 64]: 20 is the FF1 minimum length for radix 2 (2^20 >= 1,000,000).
// The error is ErrKeySize or ErrLength.
func NewBits(key []byte, n int) (*Bits, error) {
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	if n < 20 || n > 64 {
		return nil, ErrLength
	}
	u, v := uint(n/2), uint(n-n/2)
	bb := &Bits{
		block: block,
		n:     uint(n),
		v:     v,
		b:     (int(v) + 7) / 8,
		mask:  1<<uint(n) - 1, // all ones for n = 64, as the shift yields 0
		maskU: 1<<u - 1,
		maskV: 1<<v - 1,
		p:     [16]byte{1, 2, 1, 0, 0, 2, 10, byte(u), 0, 0, 0, byte(n)},
	}
	for t := range bb.cached {
		bb.cached[t] = bb.p
		binary.BigEndian.PutUint32(bb.cached[t][12:], uint32(t))
		block.Encrypt(bb.cached[t][:], bb.cached[t][:])
	}
	return bb, nil
}

// Len returns n, the number of bits of the domain.
func (b *Bits) Len() int { return int(b.n) }

// Encrypt returns the FF1 encryption of x under the tweak, an n-bit integer.
// It panics if x >= 2^n or if the tweak is longer than MaxTweakLen: both
// are programming errors, as the domain is fixed by NewBits. It does not
// allocate.
func (b *Bits) Encrypt(x uint64, tweak []byte) uint64 {
	b.check(x, tweak)
	buf := scratch.Get().(*[16]byte)
	hi, lo := b.base(buf, tweak)
	a, bv := x>>b.v, x&b.maskV
	for i := range uint64(rounds) {
		y := b.round(buf, hi, lo, i, bv)
		m := b.maskU
		if i%2 == 1 {
			m = b.maskV
		}
		a, bv = bv, (a+y)&m
	}
	scratch.Put(buf)
	return a<<b.v | bv
}

// Decrypt is the inverse of Encrypt under the same key, n and tweak, with
// the same panics. It does not allocate.
func (b *Bits) Decrypt(x uint64, tweak []byte) uint64 {
	b.check(x, tweak)
	buf := scratch.Get().(*[16]byte)
	hi, lo := b.base(buf, tweak)
	a, bv := x>>b.v, x&b.maskV
	for i := uint64(rounds); i > 0; {
		i--
		y := b.round(buf, hi, lo, i, a)
		m := b.maskU
		if i%2 == 1 {
			m = b.maskV
		}
		a, bv = (bv-y)&m, a
	}
	scratch.Put(buf)
	return a<<b.v | bv
}

// EncryptNonZero returns the image of x under a permutation of [1, 2^n),
// the domain of ids that must be positive. It panics if x is 0 or
// x >= 2^n, or if the tweak is longer than MaxTweakLen.
//
// It walks the cycle: y = Encrypt(x), and while y is 0, y = Encrypt(y).
// Following Encrypt from x, the first value again in [1, 2^n) is reached
// after at most two steps, since only one value (0) is outside the domain
// and Encrypt, being a bijection, cannot map both x != 0 and 0 to 0. The
// map from x to that first value is a bijection of [1, 2^n) (the standard
// cycle-walking argument: on each cycle of Encrypt it sends every domain
// point to the next domain point on the cycle), and DecryptNonZero, which
// walks the same cycle backwards, is its inverse.
func (b *Bits) EncryptNonZero(x uint64, tweak []byte) uint64 {
	if x == 0 {
		panic("ff1: EncryptNonZero of 0")
	}
	y := b.Encrypt(x, tweak)
	for y == 0 {
		y = b.Encrypt(y, tweak)
	}
	return y
}

// DecryptNonZero is the inverse of EncryptNonZero under the same key, n
// and tweak, with the same panics.
func (b *Bits) DecryptNonZero(x uint64, tweak []byte) uint64 {
	if x == 0 {
		panic("ff1: DecryptNonZero of 0")
	}
	y := b.Decrypt(x, tweak)
	for y == 0 {
		y = b.Decrypt(y, tweak)
	}
	return y
}

func (b *Bits) check(x uint64, tweak []byte) {
	if x&^b.mask != 0 {
		panic("ff1: input has bits set above the Bits length")
	}
	if len(tweak) > MaxTweakLen {
		panic("ff1: tweak longer than MaxTweakLen")
	}
}

// base returns, as two big-endian words, the CBC-MAC state after P and
// every block of Q = T || 0^((-t-b-1) mod 16) || [i]^1 || [NUM(B)]^b but
// the last, XORed with the bytes of the last block that precede [i]^1.
// Those depend only on the tweak, so one round is then a single AES call.
func (b *Bits) base(buf *[16]byte, tweak []byte) (hi, lo uint64) {
	t := len(tweak)
	if t <= cachedTweak {
		*buf = b.cached[t]
	} else {
		*buf = b.p
		binary.BigEndian.PutUint32(buf[12:], uint32(t))
		b.block.Encrypt(buf[:], buf[:])
	}
	qlen := (t + b.b + 1 + 15) / 16 * 16
	for off := 0; off < qlen-16; off += 16 {
		xorTweak(buf[:], tweak, off, 16)
		b.block.Encrypt(buf[:], buf[:])
	}
	xorTweak(buf[:], tweak, qlen-16, 15-b.b)
	return binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])
}

// xorTweak XORs into dst[:l] the bytes tweak[off:off+l], taking bytes past
// the end of the tweak as zero padding.
func xorTweak(dst, tweak []byte, off, l int) {
	if off >= len(tweak) {
		return
	}
	for j, c := range tweak[off:min(off+l, len(tweak))] {
		dst[j] ^= c
	}
}

// round returns y = NUM_2(S) for round i with NUM(B) = num: S is the first
// 8 bytes of R = PRF(P || Q), and R is one AES call on the state from base
// with [i]^1 || [num]^b XORed into the tail of the last block.
func (b *Bits) round(buf *[16]byte, hi, lo, i, num uint64) uint64 {
	binary.BigEndian.PutUint64(buf[:8], hi)
	binary.BigEndian.PutUint64(buf[8:], lo^i<<(8*uint(b.b))^num)
	b.block.Encrypt(buf[:], buf[:])
	return binary.BigEndian.Uint64(buf[:8])
}
