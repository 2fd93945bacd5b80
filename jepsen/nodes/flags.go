package nodes

import (
	"strings"
)

// Command-line editing for the operator faults, which restart a node with
// one flag changed (lease-change: --lease) or start the first node of a
// cluster alone (--bootstrap single: no --join, --bootstrap-expect 1). Every
// edited flag takes a value; it may appear as "--name V", "--name=V",
// "-name V" or "-name=V".

// isFlag reports whether arg is flag name ("lease") in any spelling, and
// whether its value is inline (--name=V).
func isFlag(arg, name string) (match, inline bool) {
	a := strings.TrimPrefix(arg, "-")
	a = strings.TrimPrefix(a, "-")
	if a == arg { // no dash: a value, not a flag
		return false, false
	}
	if a == name {
		return true, false
	}
	return strings.HasPrefix(a, name+"="), strings.HasPrefix(a, name+"=")
}

// DropFlag returns args without any occurrence of value flag name (and its
// value). args[0] may be the subcommand ("serve"); it is kept.
func DropFlag(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		match, inline := isFlag(args[i], name)
		if !match {
			out = append(out, args[i])
			continue
		}
		if !inline {
			i++ // skip its value
		}
	}
	return out
}

// SetFlag returns args with value flag name set to value: every earlier
// occurrence removed, "--name=value" appended (so it also wins over any
// earlier one seqd would otherwise take).
func SetFlag(args []string, name, value string) []string {
	return append(DropFlag(args, name), "--"+name+"="+value)
}

// FlagValue returns the last value of flag name in args, and whether it is
// there.
func FlagValue(args []string, name string) (string, bool) {
	val, found := "", false
	for i := 0; i < len(args); i++ {
		match, inline := isFlag(args[i], name)
		if !match {
			continue
		}
		if inline {
			_, val, _ = strings.Cut(args[i], "=")
			found = true
			continue
		}
		if i+1 < len(args) {
			val, found = args[i+1], true
			i++
		}
	}
	return val, found
}

// SeedArgs turns a node's usual `seqd serve` arguments into those of a
// server started alone to found a new cluster: no --join (nobody to ask),
// --bootstrap-expect 1 (it bootstraps itself). The other servers then join
// it as README's "Grow" procedure says.
func SeedArgs(args []string) []string {
	return SetFlag(DropFlag(args, "join"), "bootstrap-expect", "1")
}
