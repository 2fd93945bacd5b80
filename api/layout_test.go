package api

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNoAllocatorOrStateMachine guards the layout rule: api talks to
// the replicated state through cluster/ (and the root package's types and
// errors), never by importing fsm/ or sections/ itself. (They stay in
// `go list -deps ./api` as long as cluster/ imports them.)
func TestImportsNoAllocatorOrStateMachine(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		for _, banned := range []string{"github.com/seqd/seqd/fsm", "github.com/seqd/seqd/sections"} {
			if imp == banned || strings.HasPrefix(imp, banned+"/") {
				t.Errorf("api imports %s", imp)
			}
		}
	}
}
