package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/seqd/seqd/jepsen/nodes"
)

// A Grudge maps a node index to the node indexes it drops packets from.
type Grudge map[int][]int

// Complete returns the grudge that cuts the given components off from each
// other (every node drops every node of the other components).
func Complete(components ...[]int) Grudge {
	g := Grudge{}
	for i, c := range components {
		for j, d := range components {
			if i == j {
				continue
			}
			for _, a := range c {
				g[a] = append(g[a], d...)
			}
		}
	}
	for k := range g {
		slices.Sort(g[k])
	}
	return g
}

// MajoritiesRing returns, for the nodes in ring order, Jepsen's
// partition-majorities-ring: each node sees the majority of nodes nearest to
// it in the ring and drops the rest, so every node sees a majority but no two
// see the same one.
func MajoritiesRing(ring []int) Grudge {
	n := len(ring)
	m := n/2 + 1
	g := Grudge{}
	for i := range ring {
		// The window of m consecutive nodes centred on ring[i].
		in := map[int]bool{}
		for d := -(m / 2); len(in) < m; d++ {
			in[ring[((i+d)%n+n)%n]] = true
		}
		for _, x := range ring {
			if !in[x] {
				g[ring[i]] = append(g[ring[i]], x)
			}
		}
		slices.Sort(g[ring[i]])
	}
	return g
}

// Bridge returns Jepsen's bridge: the nodes other than the bridge are split
// into two halves that cannot talk to each other; the bridge talks to both.
func Bridge(bridge int, a, b []int) Grudge {
	return Complete(a, b)
}

// Describe renders a grudge with node names.
func (g Grudge) Describe(name func(int) string) string {
	var keys []int
	for k := range g {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		var from []string
		for _, f := range g[k] {
			from = append(from, name(f))
		}
		parts = append(parts, name(k)+"⊘"+strings.Join(from, "+"))
	}
	return strings.Join(parts, " ")
}

func (e *Env) partition(g Grudge) (func() error, error) {
	var errs []error
	for node, from := range g {
		errs = append(errs, e.Net.Drop(node, from))
	}
	return e.Net.HealAll, errors.Join(errs...)
}

func (e *Env) name(i int) string { return e.Cluster.Nodes[i].ID }

func (e *Env) shuffled(rng *rand.Rand) []int {
	idx := make([]int, len(e.Cluster.Nodes))
	for i := range idx {
		idx[i] = i
	}
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	return idx
}

func componentsDesc(e *Env, cs ...[]int) []string {
	var out []string
	for _, c := range cs {
		var names []string
		for _, i := range c {
			names = append(names, e.name(i))
		}
		sort.Strings(names)
		out = append(out, strings.Join(names, "+"))
	}
	return out
}

func partitionLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	l, note := e.leader(ctx, rng)
	return e.isolate(l, note)
}

// isolate cuts n off from every other node (clients still reach it).
func (e *Env) isolate(n *nodes.Node, note string) ([]string, func() error, error) {
	var rest []int
	for i := range e.Cluster.Nodes {
		if i != n.Index {
			rest = append(rest, i)
		}
	}
	heal, err := e.partition(Complete([]int{n.Index}, rest))
	d := componentsDesc(e, []int{n.Index}, rest)
	return []string{d[0] + note, "|" + d[1]}, heal, err
}

func partitionHalves(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	idx := e.shuffled(rng)
	a, b := idx[:len(idx)/2], idx[len(idx)/2:]
	heal, err := e.partition(Complete(a, b))
	d := componentsDesc(e, a, b)
	return []string{d[0], "|" + d[1]}, heal, err
}

func partitionRing(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	g := MajoritiesRing(e.shuffled(rng))
	heal, err := e.partition(g)
	return strings.Fields(g.Describe(e.name)), heal, err
}

func partitionBridge(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	idx := e.shuffled(rng)
	bridge, rest := idx[0], idx[1:]
	a, b := rest[:len(rest)/2], rest[len(rest)/2:]
	heal, err := e.partition(Bridge(bridge, a, b))
	d := componentsDesc(e, a, b)
	return []string{d[0], "|" + e.name(bridge) + "|", d[1]}, heal, err
}

func lossOn(e *Env, n *nodes.Node, note string) ([]string, func() error, error) {
	err := e.Net.Loss(n.Index, e.Loss)
	return []string{fmt.Sprintf("%s p=%g%s", n.ID, e.Loss, note)}, e.Net.HealAll, err
}

func lossLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	l, note := e.leader(ctx, rng)
	return lossOn(e, l, note)
}

func lossRandom(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	return lossOn(e, e.randomNodes(rng, 1)[0], "")
}
