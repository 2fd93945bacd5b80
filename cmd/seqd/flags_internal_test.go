package main

import (
	"slices"
	"strings"
	"testing"
)

// TestEveryCommandTakesFlagsBeforeIt: for every command the usage lists,
// flags given before it ("seqd --addr A space update s --step 5") move to
// after the whole command, its subcommands included.
func TestEveryCommandTakesFlagsBeforeIt(t *testing.T) {
	if len(commandPaths) < 20 {
		t.Fatalf("read %d commands from the usage text: %v", len(commandPaths), commandPaths)
	}
	for _, path := range commandPaths {
		args := append([]string{"--addr", "A", "--timeout=5s"}, path...)
		args = append(args, "NAME", "--step", "5")
		got, err := flagsAfterCommand(args)
		want := append(slices.Clone(path), "--addr", "A", "--timeout=5s", "NAME", "--step", "5")
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("seqd %s: %q, %v; want %q", strings.Join(args, " "), got, err, want)
		}
	}
	for _, c := range []struct{ args, want []string }{
		{[]string{"--addr", "A", "space", "create", "list"}, []string{"space", "create", "--addr", "A", "list"}},
		{[]string{"--addr", "A", "next", "7"}, []string{"next", "--addr", "A", "7"}},
		{[]string{"next", "--addr", "A", "7"}, []string{"next", "--addr", "A", "7"}},
		{[]string{"--addr", "A", "space"}, []string{"space", "--addr", "A"}},
	} {
		if got, err := flagsAfterCommand(c.args); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, %v; want %q", c.args, got, err, c.want)
		}
	}
	if _, err := flagsAfterCommand([]string{"--addr", "A"}); err == nil || !strings.Contains(err.Error(), "flags go after the command") {
		t.Errorf("flags and no command: %v, want a usage error saying where flags go", err)
	}
}
