package seqd

import (
	"errors"
	"testing"
)

func TestGenerationOrder(t *testing.T) {
	a := Generation{Lineage: "L", Number: 1, Cluster: "A"}
	b := Generation{Lineage: "L", Number: 1, Cluster: "B"}
	two := Generation{Lineage: "L", Number: 2, Cluster: "C"}
	other := Generation{Lineage: "M", Number: 9, Cluster: "D"}
	src := Generation{Lineage: "L", Number: 0, Cluster: "L"}
	cases := []struct {
		name            string
		g, o            Generation
		super, siblings bool
	}{
		{"a restore supersedes its source", a, src, true, false},
		{"the source never supersedes its restore", src, a, false, false},
		{"a restore of a restore supersedes both", two, a, true, false},
		{"two restores of one backup are siblings", a, b, false, true},
		{"a cluster is not its own sibling", a, a, false, false},
		{"another lineage is neither", other, a, false, false},
		{"the unknown generation is neither", Generation{}, a, false, false},
	}
	for _, c := range cases {
		if got := c.g.Supersedes(c.o); got != c.super {
			t.Errorf("%s: Supersedes = %v", c.name, got)
		}
		if got := c.g.Sibling(c.o); got != c.siblings {
			t.Errorf("%s: Sibling = %v", c.name, got)
		}
	}
}

func TestGenerationHeader(t *testing.T) {
	g := Generation{Lineage: "0123abcd", Number: 3, Cluster: "ffee"}
	back, err := ParseGeneration(g.String())
	if err != nil || back != g {
		t.Fatalf("round trip of %v: %v, %v", g, back, err)
	}
	if back, err := ParseGeneration(""); err != nil || back.Known() {
		t.Fatalf("empty header: %v, %v", back, err)
	}
	for _, bad := range []string{"x", "a/b/c", "a/1", "a/1/c/d", "/1/c", "a/1/", "a b/1/c", "a/-1/c", "a/99999999999999999999/c"} {
		if _, err := ParseGeneration(bad); !errors.Is(err, ErrBadGeneration) {
			t.Errorf("ParseGeneration(%q) = %v, want ErrBadGeneration", bad, err)
		}
	}
}
