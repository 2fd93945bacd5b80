// Package cli holds what seqd's commands (cmd/seqd, cmd/seqbench) share on
// their command lines: a FlagSet per subcommand whose usage text lists every
// flag with its environment variable, flags and operands in any order, every
// flag also settable as SEQD_<NAME> (the command line wins), usage errors
// that exit with status 2, and the one way a failed call is printed.
//
// It parses and reports; it never dials a server or reads a flag's meaning.
package cli
