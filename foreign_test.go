package seqd

import (
	"errors"
	"strings"
	"testing"
)

func TestForeignName(t *testing.T) {
	for in, want := range map[string]string{
		"orders":       "orders",
		"leaf-segment": "leaf-segment",
		"a.b_c-1":      "a.b_c-1",
		"MyTag":        "mytag..0.2",
		"ORDER":        "order..0.1.2.3.4",
		"leaf_Seg.X":   "leaf_seg.x..5.9",
		"9Z":           "9z..1",
	} {
		got, err := ForeignName(in)
		if err != nil || got != want {
			t.Errorf("ForeignName(%q) = %q, %v; want %q", in, got, err, want)
		}
		if !ValidName(got) {
			t.Errorf("ForeignName(%q) = %q is not a valid name", in, got)
		}
	}
	for _, in := range []string{"", "a..b", "Ab..c", "_x", "-x", ".x", "a b", "a:b", "ü", "a/b", strings.Repeat("a", 65),
		strings.Repeat("A", 30)} {
		if got, err := ForeignName(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ForeignName(%q) = %q, %v; want ErrInvalidArgument", in, got, err)
		}
	}
}

// TestForeignNameOneToOne maps every name of up to 4 characters over an
// alphabet with both cases, digits and punctuation: no two names map to
// one space, and every valid space name without ".." maps to itself.
func TestForeignNameOneToOne(t *testing.T) {
	alpha := "aAbB0._-"
	seen := map[string]string{}
	var walk func(prefix string)
	walk = func(prefix string) {
		if prefix != "" {
			got, err := ForeignName(prefix)
			if err == nil {
				if other, ok := seen[got]; ok {
					t.Fatalf("%q and %q both map to %q", other, prefix, got)
				}
				seen[got] = prefix
				if ValidName(prefix) && got != prefix {
					t.Fatalf("valid name %q maps to %q", prefix, got)
				}
			} else if ValidName(prefix) && !strings.Contains(prefix, "..") {
				t.Fatalf("valid name %q refused: %v", prefix, err)
			}
		}
		if len(prefix) == 4 {
			return
		}
		for i := 0; i < len(alpha); i++ {
			walk(prefix + alpha[i:i+1])
		}
	}
	walk("")
	if len(seen) < 1000 {
		t.Fatalf("only %d names mapped", len(seen))
	}
}
