package flake

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"

	"github.com/seqd/seqd/flake/ff1"
)

// MinSecretLen is the shortest cluster secret obfuscation accepts.
const MinSecretLen = 16

// ErrNoSecret means a namespace is obfuscated but this server was given
// no cluster secret, or one that does not derive the namespace's key check.
var ErrNoSecret = errors.New("flake: obfuscated namespace needs the cluster secret it was created with")

// DeriveKey derives a namespace's 256-bit FF1 key from the cluster secret
// (HKDF-SHA256, the namespace name as info) and the key check stored with
// the namespace: an HMAC of the key that identifies it without revealing
// it. The key itself is never written anywhere.
func DeriveKey(secret []byte, namespace string) (key []byte, check string, err error) {
	if len(secret) < MinSecretLen {
		return nil, "", fmt.Errorf("%w: the secret has %d bytes, at least %d needed", ErrNoSecret, len(secret), MinSecretLen)
	}
	key, err = hkdf.Key(sha256.New, secret, []byte("seqd flake ff1 v1"), "namespace "+namespace, 32)
	if err != nil {
		return nil, "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("seqd flake key check"))
	return key, hex.EncodeToString(m.Sum(nil)[:12]), nil
}

// Obfuscator applies a namespace's keyed permutation to its ids. ObfuscateFF1
// permutes all the layout's bits, so ids reveal neither time, worker nor
// volume; ObfuscateFF1Hour keeps the time's high bits in the clear down to a
// bucket of at least an hour (a power of two of units) and permutes the
// bits below them, with the bucket as tweak, for insert locality. Both are
// bijections on the layout's positive ids, so distinct ids stay distinct.
// An Obfuscator is safe for concurrent use.
type Obfuscator struct {
	bits   *ff1.Bits
	n      int // permuted low bits
	clear  int // bits kept in the clear above them (ObfuscateFF1Hour)
	layout Layout
}

// NewObfuscator returns the obfuscator of mode for layout under key.
func NewObfuscator(l Layout, mode string, key []byte) (*Obfuscator, error) {
	if !l.Plain() {
		return nil, fmt.Errorf("%w: only a time | worker | sequence layout is obfuscated (a shard or cluster field is meant to be read)", ErrInvalidLayout)
	}
	o := &Obfuscator{layout: l, n: l.Bits()}
	switch mode {
	case ObfuscateFF1:
	case ObfuscateFF1Hour:
		// k time bits below the clear bucket: 2^k units span at least an hour.
		k := bits.Len64(uint64((3_600_000 + int64(l.UnitMs) - 1) / int64(l.UnitMs)))
		k = min(k, int(l.TimeBits))
		o.n = k + int(l.WorkerBits) + int(l.SequenceBits)
		o.clear = l.Bits() - o.n
	default:
		return nil, fmt.Errorf("%w: obfuscation %q", ErrInvalidLayout, mode)
	}
	if o.n < 20 {
		return nil, fmt.Errorf("%w: %d bits to permute, FF1 needs 20", ErrInvalidLayout, o.n)
	}
	b, err := ff1.NewBits(key, o.n)
	if err != nil {
		return nil, err
	}
	o.bits = b
	return o, nil
}

// Encode obfuscates id, a positive id of the layout.
func (o *Obfuscator) Encode(id int64) int64 { return o.apply(id, true) }

// Decode reverses Encode; it fails for ids outside the layout.
func (o *Obfuscator) Decode(id int64) (int64, error) {
	if id <= 0 || bits.Len64(uint64(id)) > o.layout.Bits() {
		return 0, fmt.Errorf("%w: %d", ErrInvalidID, id)
	}
	return o.apply(id, false), nil
}

func (o *Obfuscator) apply(id int64, enc bool) int64 {
	u := uint64(id)
	low := u & (1<<o.n - 1)
	if o.n == 64 {
		low = u
	}
	bucket := u >> o.n
	var tweak [8]byte
	var tw []byte
	if o.clear > 0 {
		binary.BigEndian.PutUint64(tweak[:], bucket)
		tw = tweak[:]
	}
	switch {
	case bucket == 0 && enc:
		// The low bits of an id in bucket 0 are never 0: permute the
		// nonzero values among themselves, so the id stays positive.
		low = o.bits.EncryptNonZero(low, tw)
	case bucket == 0:
		low = o.bits.DecryptNonZero(low, tw)
	case enc:
		low = o.bits.Encrypt(low, tw)
	default:
		low = o.bits.Decrypt(low, tw)
	}
	return int64(bucket<<o.n | low)
}
