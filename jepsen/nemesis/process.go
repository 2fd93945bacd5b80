package nemesis

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/seqd/seqd/jepsen/nodes"
)

func kill(ns []*nodes.Node) (func() error, error) {
	var errs []error
	for _, n := range ns {
		errs = append(errs, n.Kill())
	}
	return func() error {
		var errs []error
		for _, n := range ns {
			errs = append(errs, n.Start())
		}
		return errors.Join(errs...)
	}, errors.Join(errs...)
}

func pause(ns []*nodes.Node) (func() error, error) {
	var errs []error
	for _, n := range ns {
		errs = append(errs, n.Pause())
	}
	return func() error {
		var errs []error
		for _, n := range ns {
			errs = append(errs, n.Resume())
		}
		return errors.Join(errs...)
	}, errors.Join(errs...)
}

func killLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	l, note := e.leader(ctx, rng)
	heal, err := kill([]*nodes.Node{l})
	return []string{l.ID + note}, heal, err
}

func killRandom(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	ns := e.randomNodes(rng, 1)
	heal, err := kill(ns)
	return ids(ns), heal, err
}

func killMinority(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	ns := e.randomNodes(rng, minority(len(e.Cluster.Nodes)))
	heal, err := kill(ns)
	return ids(ns), heal, err
}

func killAll(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	err := e.Cluster.KillAll()
	return ids(e.Cluster.Nodes), func() error {
		var errs []error
		for _, n := range e.Cluster.Nodes {
			errs = append(errs, n.Start())
		}
		return errors.Join(errs...)
	}, err
}

func pauseLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	l, note := e.leader(ctx, rng)
	heal, err := pause([]*nodes.Node{l})
	return []string{l.ID + note}, heal, err
}

func pauseMinority(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	ns := e.randomNodes(rng, minority(len(e.Cluster.Nodes)))
	heal, err := pause(ns)
	return ids(ns), heal, err
}
