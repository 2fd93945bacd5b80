package flake

import (
	"errors"
	"testing"
)

func TestDeriveKey(t *testing.T) {
	secret := []byte("0123456789abcdef-cluster-secret")
	k1, c1, err := DeriveKey(secret, "orders")
	if err != nil {
		t.Fatal(err)
	}
	k2, c2, _ := DeriveKey(secret, "orders")
	k3, c3, _ := DeriveKey(secret, "users")
	_, c4, _ := DeriveKey([]byte("another-secret-of-32-bytes......"), "orders")
	if string(k1) != string(k2) || c1 != c2 || len(k1) != 32 || len(c1) != 24 {
		t.Fatalf("not deterministic: %x %s / %x %s", k1, c1, k2, c2)
	}
	if string(k1) == string(k3) || c1 == c3 || c1 == c4 {
		t.Fatal("different namespaces or secrets derived the same key or check")
	}
	if _, _, err := DeriveKey([]byte("short"), "orders"); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("a short secret: %v", err)
	}
}

func TestObfuscatorIsAPermutation(t *testing.T) {
	key, _, _ := DeriveKey([]byte("0123456789abcdef-cluster-secret"), "n")
	for _, name := range PresetNames() {
		l, _ := Preset(name)
		if !l.Plain() {
			continue // not obfuscated: TestObfuscatorRefusesFields
		}
		for _, mode := range []string{ObfuscateFF1, ObfuscateFF1Hour} {
			o, err := NewObfuscator(l, mode, key)
			if err != nil {
				t.Fatalf("%s %s: %v", name, mode, err)
			}
			seen := map[int64]bool{}
			// Consecutive ids of one worker, as a generator issues them,
			// and ids of the very first unit (bucket 0).
			var ids []int64
			for i := range uint64(20000) {
				ids = append(ids, l.Compose(1000+i/7, 3, i%7))
			}
			for i := range uint64(50) {
				ids = append(ids, l.Compose(1, 0, i%(l.MaxSequence()+1)))
			}
			for _, id := range ids {
				e := o.Encode(id)
				if e <= 0 || (l.Bits() < 63 && e >= int64(1)<<l.Bits()) {
					t.Fatalf("%s %s: %d encodes to %d, outside the layout", name, mode, id, e)
				}
				if seen[e] {
					t.Fatalf("%s %s: %d encodes to %d, as an earlier id did", name, mode, id, e)
				}
				if o.Encode(id) != e {
					t.Fatalf("%s %s: not deterministic", name, mode)
				}
				d, err := o.Decode(e)
				if err != nil || d != id {
					t.Fatalf("%s %s: Decode(Encode(%d)) = %d, %v", name, mode, id, d, err)
				}
				seen[e] = true
				if mode == ObfuscateFF1Hour && e>>o.n != id>>o.n {
					t.Fatalf("%s: the hour bucket changed: %d -> %d", name, id>>o.n, e>>o.n)
				}
			}
			if mode == ObfuscateFF1 {
				// Consecutive ids must not look consecutive.
				if d := o.Encode(ids[1]) - o.Encode(ids[0]); d > -1000 && d < 1000 {
					t.Fatalf("%s: neighbours encode %d apart", name, d)
				}
			}
		}
	}
}

func TestObfuscatorRejects(t *testing.T) {
	key := make([]byte, 32)
	l, _ := Preset("snowflake")
	if _, err := NewObfuscator(l, "rot13", key); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
	o, _ := NewObfuscator(l, ObfuscateFF1, key)
	for _, bad := range []int64{0, -5} {
		if _, err := o.Decode(bad); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("Decode(%d) = %v", bad, err)
		}
	}
	js, _ := Preset("js")
	oj, _ := NewObfuscator(js, ObfuscateFF1, key)
	if _, err := oj.Decode(1 << 53); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("a 54-bit id in a 53-bit layout: %v", err)
	}
}

func BenchmarkObfuscate(b *testing.B) {
	l, _ := Preset("snowflake")
	o, _ := NewObfuscator(l, ObfuscateFF1, make([]byte, 32))
	b.ReportAllocs()
	for i := int64(1); b.Loop(); i++ {
		_ = o.Encode(l.Compose(uint64(i>>12)+1, 1, uint64(i)&4095))
	}
}
