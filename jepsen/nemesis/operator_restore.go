package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
)

// backupFile is a `seqd backup` of the cluster.
type backupFile struct {
	path  string
	taken time.Time
}

// Bounds passed to `seqd restore` by restore-mistake with builds whose
// restore needs a margin (their usage line says `seqd restore --margin N`):
// a generous margin, and when `seqd restore --help` lists them, bounds on
// the values and terms since the backup far above what a run hands out or
// elects after a backup (a few hundred thousand values in all, a few dozen
// terms), whose minimum margin (V + T × (1,000,000 + 2 × S), S the largest
// step in the backup: 112,000,000 with the 10,000 of seqd's default space)
// stays below the margin, so the command accepts them: the mistake is
// where the restore goes, not its numbers. Later builds compute the margin
// from the time since the backup (protocol 5), and take neither.
const (
	restoreMargin      = 1_000_000_000
	restoreValuesSince = 10_000_000
	restoreTermsSince  = 100
)

// restoreArgs is the `seqd restore` command line of the restore faults:
// `seqd restore --id ID --data-dir D --raft-addr A FILE`, following `seqd
// restore --help` (help): with a build whose usage line requires --margin
// or the counts (`seqd restore --margin N ...`, `seqd restore
// --values-since V ...`), also --margin, and --values-since and
// --terms-since when it lists them.
func restoreArgs(help, id, dataDir, raftAddr, file string) []string {
	args := []string{"restore", "--id", id, "--data-dir", dataDir, "--raft-addr", raftAddr}
	usage, _, _ := strings.Cut(help, "\n")
	required := func(flag string) bool {
		return strings.Contains(usage, " "+flag+" ") && !strings.Contains(usage, "["+flag)
	}
	if !required("--margin") && !required("--values-since") {
		return append(args, file)
	}
	args = append(args, "--margin", fmt.Sprint(restoreMargin))
	if strings.Contains(help, "values-since") {
		args = append(args, "--values-since", fmt.Sprint(restoreValuesSince))
	}
	if strings.Contains(help, "terms-since") {
		args = append(args, "--terms-since", fmt.Sprint(restoreTermsSince))
	}
	return append(args, file)
}

// backup takes a `seqd backup` of the running cluster into a new file of
// the operator's directory, and returns its path and the command's output.
func (e *Env) backup(ctx context.Context) (path, out string, err error) {
	if path, err = e.path("backup"); err != nil {
		return "", "", err
	}
	path += ".db"
	args := []string{"backup", "--addr", e.runningAPIs(), "--timeout", "20s", path}
	out, err = e.Cluster.Seqd(ctx, 30*time.Second, args...)
	e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(out), errSuffix(err))
	if err != nil {
		return "", out, fmt.Errorf("seqd backup: %v: %s", err, oneLine(out))
	}
	return path, out, nil
}

// restoreHelp returns `seqd restore --help` (once).
func (e *Env) restoreHelp(ctx context.Context) string {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if !e.op.helpOK {
		out, _ := e.Cluster.Seqd(ctx, 10*time.Second, "restore", "--help")
		e.op.help, e.op.helpOK = out, true
	}
	return e.op.help
}

func (e *Env) runningAPIs() string {
	var out []string
	for _, n := range e.Cluster.Nodes {
		if n.State() == nodes.Running && !e.isBroken(n) {
			out = append(out, n.API)
		}
	}
	return strings.Join(out, ",")
}

// restoreMistake: with no backup older than a few seconds, it takes one
// (`seqd backup --addr A FILE`); otherwise it restores the oldest into one
// member's stopped, wiped data directory with `seqd restore` and starts the
// member with its usual flags while the cluster keeps running: the restore
// is for a new cluster's first node, so the member must be refused (by the
// command or by the cluster) or stay out of service. Healing: README's
// procedure (node remove, wipe, start).
func restoreMistake(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	e.op.mu.Lock()
	var b *backupFile
	if len(e.op.backups) > 0 && time.Since(e.op.backups[0].taken) > 3*time.Second {
		b = e.op.backups[0]
		e.op.backups = e.op.backups[1:]
	}
	e.op.mu.Unlock()
	if b == nil {
		path, out, err := e.backup(ctx)
		if err != nil {
			return []string{"backup failed"}, nil, err
		}
		e.op.mu.Lock()
		e.op.backups = append(e.op.backups, &backupFile{path: path, taken: time.Now()})
		e.op.mu.Unlock()
		return []string{"seqd backup: " + oneLine(out)}, nil, nil
	}
	defer os.Remove(b.path)
	picked, v, err := e.pickVoters(ctx, rng, 1)
	if err != nil {
		return nil, nil, err
	}
	x := picked[0]
	note := ""
	if x.ID == v.Leader {
		note = " (leader)"
	}
	e.setBroken(x, true)
	offset := x.LogSize()
	how, err := e.stopNode(x, rng)
	errs := []error{err, x.Wipe()}
	args := restoreArgs(e.restoreHelp(ctx), x.ID, x.DataDir, x.Raft, b.path)
	out, rerr := e.Cluster.Seqd(ctx, time.Minute, args...)
	e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(out), errSuffix(rerr))
	restored := "seqd restore: " + oneLine(out)
	if rerr != nil {
		restored = fmt.Sprintf("seqd restore REFUSED (%v): %s", rerr, oneLine(out))
	}
	errs = append(errs, x.Start())
	t0 := e.Rec.Now()
	w := e.watch(x)
	targets := []string{fmt.Sprintf("%s%s restored from a backup of %v ago (stopped by %s)", x.ID, note, time.Since(b.taken).Round(100*time.Millisecond), how), restored}
	heal := func() ([]string, error) {
		// The restored member is a newer generation of the running
		// cluster's lineage that never served: it must refuse
		// (source-running: an admitted server of the cluster it would
		// replace answers; or foreign: that cluster lists it), or, if the
		// command refused, start empty and refuse as wiped. The running
		// cluster goes on serving: a generation that never served fences
		// nobody.
		v := e.verdict(x, offset)
		alone, leads := w.stop()
		var out []string
		if alone != "" {
			out = append(out, alone)
		}
		expected := []string{string(admit.SourceRunning), string(admit.Foreign)}
		if rerr != nil {
			out = append(out, "the restore command refused")
			expected = []string{string(admit.Wiped)}
		}
		switch {
		case v.refused != "":
			out = append(out, fmt.Sprintf("%s refused (refusal=%s) %v after the heal began", x.ID, v.refused, v.took.Round(100*time.Millisecond)))
			if !slices.Contains(expected, v.refused) {
				out = append(out, fmt.Sprintf("UNEXPECTED refusal %s (expected %s)", v.refused, strings.Join(expected, " or ")))
			}
			if a := afterRefusal(x, offset); a != "" {
				out = append(out, a)
			}
		case v.inService:
			out = append(out, x.ID+" TOOK PART in the cluster with the restored data (no refusal)")
		default:
			out = append(out, fmt.Sprintf("%s out of service without a refusal within %v (admission: %s; a gate opened: %v)", x.ID, verdictTimeout, v.kinds, gateOpened(x, offset) != ""))
		}
		if d := served(x, offset); d != "" {
			out = append(out, d)
		}
		out = append(out, fmt.Sprintf("became serving leader %d times; %s", leads, v.standing))
		out = append(out, e.notFenced(ctx, x, t0)...)
		start := time.Now()
		err := e.repair(x)
		if err == nil {
			out = append(out, fmt.Sprintf("repaired (remove, wipe, start): a voter again after %v", time.Since(start).Round(100*time.Millisecond)))
		}
		return out, err
	}
	return targets, heal, errors.Join(errs...)
}

// notFenced checks that the servers other than x still serve, none of them
// fenced, after a restore that never served was started next to them (at
// t0): a fenced one is a finding. It describes what it saw.
func (e *Env) notFenced(ctx context.Context, x *nodes.Node, t0 time.Duration) []string {
	var out, fenced []string
	for _, st := range e.Cluster.Statuses(context.Background(), time.Second) {
		if st.Node != x && st.Err == nil && st.Fenced {
			fenced = append(fenced, fmt.Sprintf("%s (by %s)", st.Node.ID, st.FencedBy))
		}
	}
	if len(fenced) > 0 {
		msg := fmt.Sprintf("the running cluster was fenced by a restore that never served: %s", strings.Join(fenced, ", "))
		e.finding(ctx, "fenced-by-unserved", t0, e.Rec.Now(), fenced, msg)
		out = append(out, msg)
	} else {
		out = append(out, "no server of the running cluster fenced")
	}
	if l := e.Cluster.WaitLeader(context.Background(), 10*time.Second); l != nil && l != x {
		out = append(out, "the running cluster serves (leader "+l.ID+")")
	} else {
		out = append(out, "the running cluster has NO serving leader within 10s")
	}
	return out
}
