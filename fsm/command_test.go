package fsm

import (
	"bytes"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// kindConstants returns every package-level constant of type Kind declared
// in this package's (non-test) source, except the KindIgnorable bit, by
// type-checking the source: a kind added later is found without this test
// naming it.
func kindConstants(t *testing.T) map[string]Kind {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Imports are not resolved (no importer): the errors that causes are
	// ignored, and constants of type Kind do not depend on other packages.
	conf := types.Config{Error: func(error) {}}
	pkg, _ := conf.Check("fsm", fset, files, nil)
	out := make(map[string]Kind)
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		c, ok := scope.Lookup(name).(*types.Const)
		if !ok || name == "KindIgnorable" {
			continue
		}
		if named, ok := c.Type().(*types.Named); !ok || named.Obj().Name() != "Kind" {
			continue
		}
		v, exact := constant.Uint64Val(c.Val())
		if !exact || v > 0xff {
			t.Fatalf("constant %s = %v is not a Kind value", name, c.Val())
		}
		out[name] = Kind(v)
	}
	if len(out) == 0 {
		t.Fatal("found no Kind constants")
	}
	return out
}

// TestEveryKindIsRegistered: every Kind constant has an entry in the
// registry, and every entry is a Kind constant.
func TestEveryKindIsRegistered(t *testing.T) {
	consts := kindConstants(t)
	declared := make(map[Kind]string)
	for name, k := range consts {
		if other, dup := declared[k]; dup {
			t.Errorf("%s and %s are both kind %d", name, other, k)
		}
		declared[k] = name
		if _, ok := commands[k]; !ok {
			t.Errorf("%s (kind %d) is not registered in commands", name, k)
		}
	}
	for k := range commands {
		if _, ok := declared[k]; !ok {
			t.Errorf("registered kind %d has no Kind constant", k)
		}
	}
	if t.Failed() {
		return
	}
	if _, ok := consts["KindCreateSpace"]; !ok || len(consts) < 6 {
		t.Fatalf("the type check missed constants: found %v", consts)
	}
}

// TestRegistryEntries: names are present and unique, every entry has an
// apply function, and every protocol is one this build speaks.
func TestRegistryEntries(t *testing.T) {
	names := make(map[string]Kind)
	for k, c := range commands {
		if c.name == "" {
			t.Errorf("kind %d has no name", k)
		}
		if other, dup := names[c.name]; dup {
			t.Errorf("kinds %d and %d are both named %q", k, other, c.name)
		}
		names[c.name] = k
		if c.apply == nil {
			t.Errorf("kind %d (%s) has no apply function", k, c.name)
		}
		if c.protocol < 1 || c.protocol > ProtocolVersion {
			t.Errorf("kind %d (%s) is of protocol %d, want 1 to %d", k, c.name, c.protocol, ProtocolVersion)
		}
	}
}

// TestDecodeKnowsTheRegisteredKinds: Decode calls a type byte unknown
// exactly when the registry lacks it and it is not ignorable, so that Apply
// never meets a decoded kind it cannot dispatch.
func TestDecodeKnowsTheRegisteredKinds(t *testing.T) {
	for b := 0; b < 256; b++ {
		k := Kind(b)
		_, registered := commands[k]
		c, err := Decode([]byte{byte(b)})
		unknown := err != nil && strings.Contains(err.Error(), "unknown command type")
		switch {
		case registered && unknown:
			t.Errorf("kind %d is registered but Decode does not know it", b)
		case !registered && k&KindIgnorable == 0 && !unknown:
			t.Errorf("Decode knows kind %d (err %v) but it is not registered", b, err)
		case !registered && k&KindIgnorable != 0 && (err != nil || c.Kind != k):
			t.Errorf("ignorable kind %d: Decode = %+v, %v; want it skipped", b, c, err)
		}
	}
}

// TestIgnorableKindIsLoggedOnce: an unknown ignorable kind is logged at Warn
// level the first time it is met, then skipped silently; each such entry
// still counts as applied.
func TestIgnorableKindIsLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	f, err := Open(filepath.Join(t.TempDir(), "fsm.db"), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, b := range []byte{0x91, 0x91, 0xfe} {
		l := &raft.Log{Index: uint64(10 + i), Term: 2, Type: raft.LogCommand, Data: []byte{b, 7}}
		if resp := f.Apply(l); resp != nil {
			t.Fatalf("Apply(%x) = %v, want nil", l.Data, resp)
		}
		if got := f.AppliedIndex(); got != l.Index {
			t.Fatalf("AppliedIndex = %d, want %d", got, l.Index)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want one per kind (2):\n%s", n, out)
	}
	for _, want := range []string{"kind=145", "index=10", "kind=254", "index=12", "term=2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
}
