package netns

import (
	"slices"
	"testing"
)

func TestOwnerPid(t *testing.T) {
	for ns, want := range map[string]int{"sqj-1234-n1": 1234, "sqj-7-sw": 7, "sqj-x-c": 0, "other": 0, "sqj-": 0} {
		if got := ownerPid(ns); got != want {
			t.Errorf("ownerPid(%q) = %d, want %d", ns, got, want)
		}
	}
}

func TestExec(t *testing.T) {
	got := Exec("sqj-1-n1", "seqd", "serve")
	if !slices.Equal(got, []string{"ip", "netns", "exec", "sqj-1-n1", "seqd", "serve"}) {
		t.Errorf("%v", got)
	}
}

func TestAll(t *testing.T) {
	nt := &Net{Switch: "s", Client: "c", Nodes: []Node{{NS: "a"}, {NS: "b"}}}
	if got := nt.All(); !slices.Equal(got, []string{"a", "b", "c", "s"}) {
		t.Errorf("%v", got)
	}
}
