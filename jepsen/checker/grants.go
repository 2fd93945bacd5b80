package checker

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// Grant is one worker grant as its holder logged it ("flake worker
// acquired", in a node's log for its service-mode holder, in jepsen.log
// for an embedded generator): what the leader's state machine answered.
type Grant struct {
	Time      time.Time `json:"time"`
	Source    string    `json:"source"` // the log it came from
	Namespace string    `json:"namespace"`
	Holder    string    `json:"holder"`
	Worker    uint64    `json:"worker"`
	Token     uint64    `json:"token"`
	Lo, Hi    uint64
}

var (
	grantLine = regexp.MustCompile(`msg="flake worker acquired"`)
	grantTime = regexp.MustCompile(`(?:^|\s)time=(\S+)`)
	grantAttr = regexp.MustCompile(`\s(namespace|holder|worker|token|lo|hi)=(\S+)`)
)

// ParseGrants reads the grants logged in r (seqd's and the Go client's
// text logs), labelling them with source.
func ParseGrants(r io.Reader, source string) ([]Grant, error) {
	var out []Grant
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !grantLine.MatchString(line) {
			continue
		}
		m := grantTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		g := Grant{Time: t, Source: source}
		for _, a := range grantAttr.FindAllStringSubmatch(line, -1) {
			v, _ := strconv.ParseUint(a[2], 10, 64)
			switch a[1] {
			case "namespace":
				g.Namespace = a[2]
			case "holder":
				g.Holder = a[2]
			case "worker":
				g.Worker = v
			case "token":
				g.Token = v
			case "lo":
				g.Lo = v
			case "hi":
				g.Hi = v
			}
		}
		out = append(out, g)
	}
	return out, sc.Err()
}

// Grants checks the grants the holders logged, per namespace and worker in
// the order they were logged: every grant's fencing token is above every
// earlier grant's (a token at or below one already handed out means the
// leader's state machine did not hold the earlier grant: replicas
// diverged), and, unless overlap is allowed (--unsafe-flake-trust-clock),
// every range starts at or above the end of every earlier range (the rule
// that makes ids unique). Key is the worker.
func Grants(grants []Grant, allowOverlap bool, limit int) *Result {
	a := newAnomalies(limit, "token", "overlap")
	byWorker := map[workerKey][]Grant{}
	for _, g := range grants {
		k := workerKey{g.Namespace, g.Worker}
		byWorker[k] = append(byWorker[k], g)
	}
	for _, k := range sortedKeys(byWorker) {
		gs := byWorker[k]
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].Time.Before(gs[j].Time) })
		var top, end Grant // the earlier grants with the highest token and the highest end
		for i, g := range gs {
			if i > 0 && g.Token <= top.Token {
				a.add("token", k.worker, fmt.Sprintf("namespace %q worker %d: token %d granted to %s at %s (%s), after token %d to %s at %s (%s)",
					k.ns, k.worker, g.Token, g.Holder, g.Time.Format("15:04:05.000"), g.Source, top.Token, top.Holder, top.Time.Format("15:04:05.000"), top.Source))
			}
			if i > 0 && !allowOverlap && g.Lo < end.Hi {
				a.add("overlap", k.worker, fmt.Sprintf("namespace %q worker %d: range (%d, %d] granted to %s at %s (%s) starts %d units below the end of (%d, %d] granted to %s at %s",
					k.ns, k.worker, g.Lo, g.Hi, g.Holder, g.Time.Format("15:04:05.000"), g.Source, end.Hi-g.Lo, end.Lo, end.Hi, end.Holder, end.Time.Format("15:04:05.000")))
			}
			if i == 0 || g.Token > top.Token {
				top = g
			}
			if i == 0 || g.Hi > end.Hi {
				end = g
			}
		}
	}
	a.r.Notes = append(a.r.Notes, fmt.Sprintf("%d grants logged by holders, %d workers", len(grants), len(byWorker)))
	if allowOverlap {
		a.r.Notes = append(a.r.Notes, "ranges were not checked for overlap (--unsafe-flake-trust-clock)")
	}
	return a.r
}
