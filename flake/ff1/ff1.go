// Package ff1 implements the FF1 format-preserving encryption mode of NIST
// SP 800-38G Rev. 1 over AES-128, AES-192 or AES-256, using only the
// standard library.
//
// Cipher is the generic algorithm (Algorithms 7 and 8 of the standard) for
// any radix in [2, 65536], on strings of numerals. Bits is a fast,
// allocation-free specialisation of the same algorithm to radix 2 and at
// most 64 numerals: a keyed permutation of the n-bit integers, meant for
// turning sequential 64-bit ids into ids that do not reveal their order.
// For equal keys, lengths and tweaks both give bit-for-bit the same result.
//
// FF1 is a block cipher on a small domain: it hides the input, not the fact
// that two equal inputs under the same key and tweak give equal outputs.
package ff1

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"math/big"
)

// Errors returned by New, NewBits, Cipher.Encrypt and Cipher.Decrypt.
var (
	// ErrKeySize reports a key that is not 16, 24 or 32 bytes long.
	ErrKeySize = errors.New("ff1: key must be 16, 24 or 32 bytes")
	// ErrRadix reports a radix outside [2, 65536].
	ErrRadix = errors.New("ff1: radix must be in [2, 65536]")
	// ErrLength reports an input shorter than the minimum length for its
	// radix (radix^minlen >= 1,000,000 and minlen >= 2), longer than
	// 2^32-1 numerals, or, for NewBits, a bit count outside [20, 64].
	ErrLength = errors.New("ff1: input length out of range")
	// ErrNumeral reports a numeral that is not smaller than the radix.
	ErrNumeral = errors.New("ff1: numeral out of range for the radix")
	// ErrTweak reports a tweak longer than MaxTweakLen bytes.
	ErrTweak = errors.New("ff1: tweak too long")
)

const (
	// MaxTweakLen is the longest tweak, in bytes, that this package accepts
	// (the parameter maxTlen of SP 800-38G, which leaves it to the
	// implementation).
	MaxTweakLen = 1 << 16

	// maxLen is the longest input, in numerals: SP 800-38G requires
	// maxlen < 2^32, since the length is encoded in 4 bytes of P.
	maxLen = 1<<32 - 1

	rounds = 10
)

// Cipher is FF1 with a fixed AES key and radix. It holds no mutable state,
// so one Cipher is safe for concurrent use by several goroutines.
type Cipher struct {
	block  cipher.Block
	radix  int
	minLen int
}

// New returns an FF1 cipher keyed by key, which must be 16, 24 or 32 bytes
// long (selecting AES-128, AES-192 or AES-256), for numerals in the given
// radix, which must be in [2, 65536]. The key is not retained after New
// returns. The error is ErrKeySize or ErrRadix.
func New(key []byte, radix int) (*Cipher, error) {
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	if radix < 2 || radix > 1<<16 {
		return nil, ErrRadix
	}
	return &Cipher{block: block, radix: radix, minLen: minLen(radix)}, nil
}

func newBlock(key []byte) (cipher.Block, error) {
	switch len(key) {
	case 16, 24, 32:
		return aes.NewCipher(key)
	}
	return nil, ErrKeySize
}

// minLen returns the smallest length m >= 2 with radix^m >= 1,000,000.
func minLen(radix int) int {
	m, p := 1, uint64(radix)
	for p < 1000000 || m < 2 {
		m++
		p *= uint64(radix)
	}
	return m
}

// Radix returns the radix the cipher was created with.
func (c *Cipher) Radix() int { return c.radix }

// MinLen returns the shortest input Encrypt and Decrypt accept: the
// smallest minlen >= 2 with radix^minlen >= 1,000,000.
func (c *Cipher) MinLen() int { return c.minLen }

// Encrypt returns FF1.Encrypt(K, T, X) of SP 800-38G (Algorithm 7) for the
// numeral string X = numerals, most significant numeral first, and tweak
// T = tweak, as a new slice of the same length. The input is not modified.
// The error is ErrLength if len(numerals) is below MinLen or above 2^32-1,
// ErrNumeral if a numeral is not below the radix, or ErrTweak if the tweak
// is longer than MaxTweakLen.
func (c *Cipher) Encrypt(numerals []uint16, tweak []byte) ([]uint16, error) {
	return c.crypt(numerals, tweak, true)
}

// Decrypt returns FF1.Decrypt(K, T, Y) of SP 800-38G (Algorithm 8), the
// inverse of Encrypt under the same key, radix and tweak, with the same
// contract for inputs and errors.
func (c *Cipher) Decrypt(numerals []uint16, tweak []byte) ([]uint16, error) {
	return c.crypt(numerals, tweak, false)
}

func (c *Cipher) crypt(x []uint16, tweak []byte, encrypt bool) ([]uint16, error) {
	n, t := len(x), len(tweak)
	if n < c.minLen || uint64(n) > maxLen {
		return nil, ErrLength
	}
	if t > MaxTweakLen {
		return nil, ErrTweak
	}
	for _, d := range x {
		if int(d) >= c.radix {
			return nil, ErrNumeral
		}
	}
	// Steps 1-4: the halves, and the byte lengths b of NUM(B) and d of S.
	// ceil(v*log2(radix)) is the bit length of radix^v - 1, exactly.
	u := n / 2
	v := n - u
	radix := big.NewInt(int64(c.radix))
	modU := new(big.Int).Exp(radix, big.NewInt(int64(u)), nil)
	modV := new(big.Int).Exp(radix, big.NewInt(int64(v)), nil)
	b := (new(big.Int).Sub(modV, big.NewInt(1)).BitLen() + 7) / 8
	d := 4*((b+3)/4) + 4

	// Step 5: P; step 6.i: Q = T || 0^((-t-b-1) mod 16) || [i]^1 || [NUM(B)]^b.
	pq := make([]byte, 16+(t+b+1+15)/16*16)
	copy(pq, []byte{1, 2, 1})
	pq[3], pq[4], pq[5] = byte(c.radix>>16), byte(c.radix>>8), byte(c.radix)
	pq[6], pq[7] = 10, byte(u)
	binary.BigEndian.PutUint32(pq[8:], uint32(n))
	binary.BigEndian.PutUint32(pq[12:], uint32(t))
	copy(pq[16:], tweak)
	numB := pq[len(pq)-b:]
	s := make([]byte, (d+15)/16*16)

	a, bb := num(x[:u], c.radix), num(x[u:], c.radix)
	y := new(big.Int)
	for k := 0; k < rounds; k++ {
		i := k
		if !encrypt {
			i = rounds - 1 - k
		}
		// Encryption feeds B to the PRF and updates A; decryption feeds A
		// and updates B. Swapping the roles makes one loop serve both.
		in, out := bb, a
		if !encrypt {
			in, out = a, bb
		}
		pq[len(pq)-b-1] = byte(i)
		in.FillBytes(numB)
		c.prf(s[:16], pq)
		for j := 1; j < len(s)/16; j++ { // step 6.iii
			blk := s[16*j : 16*j+16]
			copy(blk, s[:16])
			binary.BigEndian.PutUint64(blk[8:], binary.BigEndian.Uint64(blk[8:])^uint64(j))
			c.block.Encrypt(blk, blk)
		}
		y.SetBytes(s[:d])
		mod := modU
		if i%2 == 1 {
			mod = modV
		}
		if encrypt {
			out.Add(out, y) // c = (NUM(A) + y) mod radix^m; A = B; B = C
			out.Mod(out, mod)
			a, bb = bb, out
		} else {
			out.Sub(out, y) // c = (NUM(B) - y) mod radix^m; B = A; A = C
			out.Mod(out, mod)
			a, bb = out, a
		}
	}
	res := make([]uint16, n)
	str(res[:u], a, c.radix)
	str(res[u:], bb, c.radix)
	return res, nil
}

// prf sets dst (16 bytes) to PRF(x) of SP 800-38G, the CBC-MAC of x under
// the cipher key with a zero IV; len(x) is a multiple of 16.
func (c *Cipher) prf(dst, x []byte) {
	clear(dst)
	for ; len(x) > 0; x = x[16:] {
		for j := range 16 {
			dst[j] ^= x[j]
		}
		c.block.Encrypt(dst, dst)
	}
}

// chunk returns the largest k with radix^k < 2^64, and radix^k.
func chunk(radix int) (int, uint64) {
	k, p := 1, uint64(radix)
	for p <= ^uint64(0)/uint64(radix) {
		k++
		p *= uint64(radix)
	}
	return k, p
}

// num returns NUM_radix(x), the integer whose base-radix digits, most
// significant first, are x.
func num(x []uint16, radix int) *big.Int {
	k, _ := chunk(radix)
	z, w, m := new(big.Int), new(big.Int), new(big.Int)
	for len(x) > 0 {
		l := min(k, len(x))
		acc, scale := uint64(0), uint64(1)
		for _, d := range x[:l] {
			acc = acc*uint64(radix) + uint64(d)
			scale *= uint64(radix)
		}
		z.Mul(z, m.SetUint64(scale))
		z.Add(z, w.SetUint64(acc))
		x = x[l:]
	}
	return z
}

// str sets dst to STR^m_radix(z), the m = len(dst) base-radix digits of z,
// most significant first; z < radix^m. z is destroyed.
func str(dst []uint16, z *big.Int, radix int) {
	k, p := chunk(radix)
	div, r := new(big.Int).SetUint64(p), new(big.Int)
	for i := len(dst); i > 0; {
		z.QuoRem(z, div, r)
		rem := r.Uint64()
		for j := 0; j < k && i > 0; j++ {
			i--
			dst[i] = uint16(rem % uint64(radix))
			rem /= uint64(radix)
		}
	}
}
