package nemesis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
)

// What the faults read of seqd's admission (who may take part in each raft
// group, cluster/admit) is its kinds, never its messages: the kind of each
// group's last verdict in ClusterStatus (GroupState.admission), and the
// structured attributes of its log lines: admission=<kind> on every
// verdict it logs (a gate that opens, a wait, a refusal), refusal=<kind>
// on a refusal, group=<n> when the server runs several groups (a line
// without it is about its only group, or, for a fence, every group).

// admitted reports whether a verdict of kind k opens a group's gate.
func admitted(k string) bool {
	switch admit.Kind(k) {
	case admit.ByLeader, admit.ByWitness, admit.ByAnswers, admit.BySolo, admit.ByJoin, admit.ByFresh, admit.ByBootstrap, admit.Unchecked:
		return true
	}
	return false
}

// refusedKind reports whether a verdict of kind k keeps a server out until
// an operator acts.
func refusedKind(k string) bool {
	switch admit.Kind(k) {
	case admit.Foreign, admit.Clusters, admit.Removed, admit.Stale, admit.Wiped, admit.Sibling, admit.SourceRunning, admit.Superseded:
		return true
	}
	return false
}

// verdictLine is one admission verdict a server logged.
type verdictLine struct {
	Kind    string
	Group   int  // -1: not named (its only group, or every group)
	Refused bool // logged with refusal=<kind>
	Line    int  // index of the line in the log excerpt
}

// Admitted reports whether the verdict opened the group's gate.
func (v verdictLine) Admitted() bool { return !v.Refused && admitted(v.Kind) }

// sameGroup reports whether two verdicts are about the same raft group (a
// verdict that names none is about every group).
func sameGroup(a, b int) bool { return a < 0 || b < 0 || a == b }

// verdicts returns the admission verdicts in a log excerpt (lines of
// slog's text format), in order, and its lines.
func verdicts(log string) ([]verdictLine, []string) {
	lines := strings.Split(log, "\n")
	var out []verdictLine
	for i, l := range lines {
		if !strings.Contains(l, "admission=") {
			continue
		}
		a := logAttrs(l)
		k, ok := a["admission"]
		if !ok {
			continue
		}
		v := verdictLine{Kind: k, Group: -1, Line: i}
		if r, ok := a["refusal"]; ok {
			v.Refused, v.Kind = true, r
		}
		if g, err := strconv.Atoi(a["group"]); err == nil {
			v.Group = g
		}
		out = append(out, v)
	}
	return out, lines
}

// logAttrs parses the key=value attributes of one line of slog's text
// format (a value with spaces or quotes is quoted as Go quotes strings).
// Words that are not key=value are skipped.
func logAttrs(line string) map[string]string {
	out := map[string]string{}
	for rest := line; rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		eq := strings.IndexByte(rest, '=')
		sp := strings.IndexByte(rest, ' ')
		if eq <= 0 || (sp >= 0 && sp < eq) {
			if sp < 0 {
				break
			}
			rest = rest[sp:]
			continue
		}
		key, val := rest[:eq], rest[eq+1:]
		if strings.HasPrefix(val, `"`) {
			q, err := strconv.QuotedPrefix(val)
			if err != nil {
				break
			}
			out[key], _ = strconv.Unquote(q)
			rest = val[len(q):]
			continue
		}
		end := strings.IndexByte(val, ' ')
		if end < 0 {
			end = len(val)
		}
		out[key], rest = val[:end], val[end:]
	}
	return out
}

// refusal returns the kind of the first refusal a node logged since
// offset (refusal=<kind>), or "".
func refusal(n *nodes.Node, offset int64) string {
	vs, _ := verdicts(n.LogSince(offset))
	for _, v := range vs {
		if v.Refused {
			return v.Kind
		}
	}
	return ""
}

// gateOpened returns the kind of the first verdict that opened one of a
// node's gates since offset ("" if none did).
func gateOpened(n *nodes.Node, offset int64) string {
	vs, _ := verdicts(n.LogSince(offset))
	for _, v := range vs {
		if v.Admitted() {
			return v.Kind
		}
	}
	return ""
}

// afterRefusal reports what a node that logged a refusal since offset
// logged after it: that a verdict opened the gate of the group it refused
// (admitted after all: the refusal was not final) and that it served as
// leader, or "". With several groups, other groups' gates may open: each
// group is judged on its own (a copy older than one group's record may be
// too recent to tell apart in another).
func afterRefusal(n *nodes.Node, offset int64) string {
	vs, lines := verdicts(n.LogSince(offset))
	i := slices.IndexFunc(vs, func(v verdictLine) bool { return v.Refused })
	if i < 0 {
		return ""
	}
	first := vs[i]
	for _, v := range vs[i+1:] {
		if v.Admitted() && sameGroup(first.Group, v.Group) {
			d := "THEN its raft gate OPENED in the same process (admission=" + v.Kind + " after refusal=" + first.Kind + ")"
			if c := strings.Count(strings.Join(lines[first.Line+1:], "\n"), servedLog); c > 0 {
				d += " and it logged \"" + servedLog + "\" " + strconv.Itoa(c) + " times"
			}
			return d
		}
	}
	return ""
}

// gateOpenedBefore reports whether a node that logged a refusal since
// offset logged, before it, a verdict that opened the gate of the group it
// refused.
func gateOpenedBefore(n *nodes.Node, offset int64) bool {
	vs, _ := verdicts(n.LogSince(offset))
	i := slices.IndexFunc(vs, func(v verdictLine) bool { return v.Refused })
	if i < 0 {
		return false
	}
	return slices.ContainsFunc(vs[:i], func(v verdictLine) bool { return v.Admitted() && sameGroup(vs[i].Group, v.Group) })
}

// statusRefusal returns the first refusal kind among a node's groups in
// its status (its current verdicts), or "".
func statusRefusal(st nodes.Status) string {
	var gs []int
	for g := range st.Groups {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	for _, g := range gs {
		if k := st.Groups[g].Admission; refusedKind(k) {
			return k
		}
	}
	return ""
}

// waiting reports whether a node's status shows a group whose last verdict
// was a wait of kind k (for example quorum-wait) while its gate is shut.
func waiting(st nodes.Status, k admit.Kind) bool {
	for _, g := range st.Groups {
		if !g.RaftOpen && g.Admission == string(k) {
			return true
		}
	}
	return false
}

// refusedNow returns the refusal kind a node shows: its status's, or else
// the first it logged since offset ("" if neither shows one).
func (e *Env) refusedNow(n *nodes.Node, offset int64) string {
	st := e.Cluster.StatusOf(context.Background(), n, time.Second)
	if st.Err == nil {
		if k := statusRefusal(st); k != "" {
			return k
		}
	}
	return refusal(n, offset)
}
