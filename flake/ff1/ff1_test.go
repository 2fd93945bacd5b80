package ff1

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// numerals maps a string over alphabet to its numerals.
func numerals(t testing.TB, s string) []uint16 {
	x := make([]uint16, len(s))
	for i := range s {
		d := strings.IndexByte(alphabet, s[i])
		if d < 0 {
			t.Fatalf("%q: not in the alphabet", s)
		}
		x[i] = uint16(d)
	}
	return x
}

// text maps numerals below 36 back to a string over alphabet.
func text(x []uint16) string {
	var sb strings.Builder
	for _, d := range x {
		sb.WriteByte(alphabet[d])
	}
	return sb.String()
}

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	key128 = "2B7E151628AED2A6ABF7158809CF4F3C"
	key192 = key128 + "EF4359D8D580AA4F"
	key256 = key192 + "7F036D6F04FC6A94"
)

// The nine FF1 samples of NIST (FF1samples.pdf, SP 800-38G examples).
var samples = []struct {
	key, tweak string
	radix      int
	pt, ct     string
}{
	{key128, "", 10, "0123456789", "2433477484"},
	{key128, "39383736353433323130", 10, "0123456789", "6124200773"},
	{key128, "3737373770717273373737", 36, "0123456789abcdefghi", "a9tv40mll9kdu509eum"},
	{key192, "", 10, "0123456789", "2830668132"},
	{key192, "39383736353433323130", 10, "0123456789", "2496655549"},
	{key192, "3737373770717273373737", 36, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"},
	{key256, "", 10, "0123456789", "6657667009"},
	{key256, "39383736353433323130", 10, "0123456789", "1001623463"},
	{key256, "3737373770717273373737", 36, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"},
}

func TestNISTSamples(t *testing.T) {
	for i, s := range samples {
		c, err := New(unhex(t, s.key), s.radix)
		if err != nil {
			t.Fatal(err)
		}
		tweak := unhex(t, s.tweak)
		ct, err := c.Encrypt(numerals(t, s.pt), tweak)
		if err != nil || text(ct) != s.ct {
			t.Errorf("sample %d: Encrypt = %q, %v; want %q", i+1, text(ct), err, s.ct)
		}
		pt, err := c.Decrypt(numerals(t, s.ct), tweak)
		if err != nil || text(pt) != s.pt {
			t.Errorf("sample %d: Decrypt = %q, %v; want %q", i+1, text(pt), err, s.pt)
		}
	}
}

func randKey(r *rand.Rand) []byte {
	key := make([]byte, []int{16, 24, 32}[r.IntN(3)])
	for i := range key {
		key[i] = byte(r.Uint32())
	}
	return key
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestCipherRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		radix := []int{2, 3, 10, 26, 36, 255, 256, 1000, 1 << 16}[r.IntN(9)]
		c, err := New(randKey(r), radix)
		if err != nil {
			t.Fatal(err)
		}
		n := c.MinLen() + r.IntN(60)
		x := make([]uint16, n)
		for i := range x {
			x[i] = uint16(r.IntN(radix))
		}
		tweak := randBytes(r, r.IntN(40))
		y, err := c.Encrypt(x, tweak)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range y {
			if int(d) >= radix {
				t.Fatalf("radix %d: output numeral %d", radix, d)
			}
		}
		z, err := c.Decrypt(y, tweak)
		if err != nil || !equal(x, z) {
			t.Fatalf("radix %d n %d: Decrypt(Encrypt(%v)) = %v, %v", radix, n, x, z, err)
		}
	}
}

func equal(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestInvalid(t *testing.T) {
	key := unhex(t, key128)
	for _, l := range []int{0, 8, 15, 17, 31, 33} {
		if _, err := New(make([]byte, l), 10); !errors.Is(err, ErrKeySize) {
			t.Errorf("New with %d-byte key: %v, want ErrKeySize", l, err)
		}
		if _, err := NewBits(make([]byte, l), 64); !errors.Is(err, ErrKeySize) {
			t.Errorf("NewBits with %d-byte key: %v, want ErrKeySize", l, err)
		}
	}
	for _, radix := range []int{-1, 0, 1, 1<<16 + 1} {
		if _, err := New(key, radix); !errors.Is(err, ErrRadix) {
			t.Errorf("New radix %d: %v, want ErrRadix", radix, err)
		}
	}
	for _, n := range []int{0, 19, 65} {
		if _, err := NewBits(key, n); !errors.Is(err, ErrLength) {
			t.Errorf("NewBits n %d: %v, want ErrLength", n, err)
		}
	}
	for _, tc := range []struct{ radix, min int }{{2, 20}, {10, 6}, {36, 4}, {1000, 2}, {1 << 16, 2}} {
		c, err := New(key, tc.radix)
		if err != nil {
			t.Fatal(err)
		}
		if c.MinLen() != tc.min {
			t.Errorf("radix %d: MinLen %d, want %d", tc.radix, c.MinLen(), tc.min)
		}
		if _, err := c.Encrypt(make([]uint16, tc.min-1), nil); !errors.Is(err, ErrLength) {
			t.Errorf("radix %d, %d numerals: %v, want ErrLength", tc.radix, tc.min-1, err)
		}
		if _, err := c.Decrypt(make([]uint16, tc.min-1), nil); !errors.Is(err, ErrLength) {
			t.Errorf("radix %d, %d numerals: Decrypt %v, want ErrLength", tc.radix, tc.min-1, err)
		}
		if _, err := c.Encrypt(make([]uint16, tc.min), nil); err != nil {
			t.Errorf("radix %d, %d numerals: %v", tc.radix, tc.min, err)
		}
		if tc.radix < 1<<16 {
			x := make([]uint16, tc.min)
			x[tc.min-1] = uint16(tc.radix)
			if _, err := c.Encrypt(x, nil); !errors.Is(err, ErrNumeral) {
				t.Errorf("radix %d, numeral %d: %v, want ErrNumeral", tc.radix, tc.radix, err)
			}
			if _, err := c.Decrypt(x, nil); !errors.Is(err, ErrNumeral) {
				t.Errorf("radix %d, numeral %d: Decrypt %v, want ErrNumeral", tc.radix, tc.radix, err)
			}
		}
		if _, err := c.Encrypt(make([]uint16, tc.min), make([]byte, MaxTweakLen+1)); !errors.Is(err, ErrTweak) {
			t.Errorf("radix %d, long tweak: %v, want ErrTweak", tc.radix, err)
		}
	}
	b, err := NewBits(key, 20)
	if err != nil {
		t.Fatal(err)
	}
	mustPanic(t, "Encrypt(2^20)", func() { b.Encrypt(1<<20, nil) })
	mustPanic(t, "Decrypt(2^63)", func() { b.Decrypt(1<<63, nil) })
	mustPanic(t, "Encrypt long tweak", func() { b.Encrypt(1, make([]byte, MaxTweakLen+1)) })
	mustPanic(t, "EncryptNonZero(0)", func() { b.EncryptNonZero(0, nil) })
	mustPanic(t, "DecryptNonZero(0)", func() { b.DecryptNonZero(0, nil) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// bitsNumerals is the radix-2 numeral string Bits stands for x with.
func bitsNumerals(x uint64, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = uint16(x >> (n - 1 - i) & 1)
	}
	return s
}

func TestBitsMatchesCipher(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := 0
	for range 150 {
		key := randKey(r)
		c, err := New(key, 2)
		if err != nil {
			t.Fatal(err)
		}
		for n := 20; n <= 64; n += 1 + r.IntN(4) {
			b, err := NewBits(key, n)
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != n {
				t.Fatalf("Len %d, want %d", b.Len(), n)
			}
			x := r.Uint64() >> (64 - n)
			// Tweaks from empty to several blocks, with and without the cache.
			tweak := randBytes(r, []int{0, r.IntN(17), r.IntN(cachedTweak + 1), cachedTweak + 1 + r.IntN(70)}[r.IntN(4)])
			got := b.Encrypt(x, tweak)
			want, err := c.Encrypt(bitsNumerals(x, n), tweak)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(bitsNumerals(got, n), want) || got>>n != 0 {
				t.Fatalf("n %d x %#x tweak %x: Bits %#x, Cipher %v", n, x, tweak, got, want)
			}
			if d := b.Decrypt(got, tweak); d != x {
				t.Fatalf("n %d x %#x: Decrypt(Encrypt) = %#x", n, x, d)
			}
			cases++
		}
	}
	t.Logf("%d cases", cases)
}

func TestBitsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b, err := NewBits(randKey(r), 63)
	if err != nil {
		t.Fatal(err)
	}
	for range 20000 {
		x := r.Uint64() >> 1
		tweak := randBytes(r, r.IntN(50))
		y := b.Encrypt(x, tweak)
		if y>>63 != 0 || b.Decrypt(y, tweak) != x {
			t.Fatalf("x %#x tweak %x: Encrypt %#x, Decrypt %#x", x, tweak, y, b.Decrypt(y, tweak))
		}
		if x != 0 {
			y = b.EncryptNonZero(x, tweak)
			if y == 0 || b.DecryptNonZero(y, tweak) != x {
				t.Fatalf("x %#x: EncryptNonZero %#x", x, y)
			}
		}
	}
}

// TestNonZeroCycleWalk uses n = 20, small enough to find the x that Encrypt
// sends to 0 and to check that EncryptNonZero is a permutation of
// [1, 2^20).
func TestNonZeroCycleWalk(t *testing.T) {
	const n = 20
	b, err := NewBits(unhex(t, key256), n)
	if err != nil {
		t.Fatal(err)
	}
	for _, tweak := range [][]byte{nil, []byte("tweak")} {
		z := b.Decrypt(0, tweak) // the x with Encrypt(x) == 0
		if z == 0 || b.Encrypt(z, tweak) != 0 {
			t.Fatalf("Decrypt(0) = %#x", z)
		}
		y := b.EncryptNonZero(z, tweak)
		if y == 0 || y != b.Encrypt(0, tweak) || b.DecryptNonZero(y, tweak) != z {
			t.Fatalf("EncryptNonZero(%#x) = %#x, Encrypt(0) = %#x", z, y, b.Encrypt(0, tweak))
		}
		if tweak != nil {
			continue // the exhaustive check below is slow under -race
		}
		seen := make([]bool, 1<<n)
		for x := uint64(1); x < 1<<n; x++ {
			y := b.EncryptNonZero(x, tweak)
			if y == 0 || y >= 1<<n || seen[y] {
				t.Fatalf("EncryptNonZero(%#x) = %#x: not a permutation of [1, 2^20)", x, y)
			}
			seen[y] = true
			if x%97 == 0 && b.DecryptNonZero(y, tweak) != x {
				t.Fatalf("DecryptNonZero(EncryptNonZero(%#x)) != x", x)
			}
		}
	}
}

func TestBitsConcurrent(t *testing.T) {
	b, err := NewBits(unhex(t, key128), 64)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			tweak := make([]byte, 8*g)
			for x := uint64(g) << 40; x < uint64(g)<<40+2000; x++ {
				if b.Decrypt(b.Encrypt(x, tweak), tweak) != x {
					t.Errorf("goroutine %d: round trip of %#x failed", g, x)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestBitsAllocs checks that Encrypt and Decrypt do not allocate. (Under
// -race, sync.Pool drops some Puts on purpose; AllocsPerRun truncates the
// resulting fraction of an allocation per run to 0.)
func TestBitsAllocs(t *testing.T) {
	b, err := NewBits(unhex(t, key128), 63)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []int{0, 8, cachedTweak, 100} {
		tweak := make([]byte, l)
		if a := testing.AllocsPerRun(100, func() { b.Decrypt(b.Encrypt(12345, tweak), tweak) }); a != 0 {
			t.Errorf("tweak of %d bytes: %v allocations per round trip", l, a)
		}
	}
}

var sink uint64

func BenchmarkBitsEncrypt63(b *testing.B) {
	bits, err := NewBits(unhex(b, key128), 63)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = bits.Encrypt(uint64(i), nil)
	}
}

func BenchmarkBitsEncrypt63Tweak40(b *testing.B) {
	bits, err := NewBits(unhex(b, key128), 63)
	if err != nil {
		b.Fatal(err)
	}
	tweak := make([]byte, 40)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = bits.Encrypt(uint64(i), tweak)
	}
}

func BenchmarkCipherEncrypt(b *testing.B) {
	c, err := New(unhex(b, key128), 2)
	if err != nil {
		b.Fatal(err)
	}
	x := bitsNumerals(12345, 63)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encrypt(x, nil); err != nil {
			b.Fatal(err)
		}
	}
}
