package checker

import (
	"strings"
	"testing"
)

// grantLog is what holders log (a node's line carries node=, a
// generator's does not).
const grantLog = `time=2026-11-23T19:12:37.834Z level=INFO msg="flake worker acquired" namespace=ns holder=aa worker=7 token=5 lo=1000 hi=31000
time=2026-11-23T19:12:38.000Z level=INFO msg="raft: something else" node=n1
time=2026-11-23T19:12:50.100Z level=INFO msg="flake worker acquired" node=n1 namespace=ns holder=bb worker=7 token=6 lo=31000 hi=61000
time=2026-11-23T19:12:51.100Z level=INFO msg="flake worker acquired" namespace=ns holder=cc worker=3 token=1 lo=40000 hi=70000
`

func TestParseGrants(t *testing.T) {
	gs, err := ParseGrants(strings.NewReader(grantLog), "n1.log")
	if err != nil || len(gs) != 3 {
		t.Fatalf("%d grants, %v", len(gs), err)
	}
	g := gs[1]
	if g.Namespace != "ns" || g.Holder != "bb" || g.Worker != 7 || g.Token != 6 || g.Lo != 31000 || g.Hi != 61000 || g.Source != "n1.log" || g.Time.Second() != 50 {
		t.Fatalf("%+v", g)
	}
	if r := Grants(gs, false, 10); r.Valid != Valid {
		t.Fatalf("valid grants: %+v", r)
	}
}

// TestGrantsCatchesDivergence: a leader whose replica lost a grant hands
// the worker out again with a token already used and a range below the
// earlier one's end, as a replayed acquire made a restarted replica do.
func TestGrantsCatchesDivergence(t *testing.T) {
	gs, _ := ParseGrants(strings.NewReader(grantLog+
		`time=2026-11-23T19:13:06.658Z level=INFO msg="flake worker acquired" namespace=ns holder=dd worker=7 token=2 lo=59000 hi=89000
`), "jepsen.log")
	r := Grants(gs, false, 10)
	if r.Valid != Invalid || r.Counts["token"] != 1 || r.Counts["overlap"] != 1 || r.Anomalies[0].Key != 7 ||
		!strings.Contains(r.Anomalies[0].Msg, "token 2 granted to dd") || !strings.Contains(r.Anomalies[1].Msg, "starts 2000 units below") {
		t.Fatalf("%+v", r)
	}
	// With --unsafe-flake-trust-clock ranges may overlap; tokens still rise.
	if r := Grants(gs, true, 10); r.Counts["overlap"] != 0 || r.Counts["token"] != 1 {
		t.Fatalf("trust clock: %+v", r)
	}
}
