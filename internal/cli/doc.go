// Package cli holds what seqd's commands (cmd/seqd, cmd/seqbench) share on
// their command lines: a FlagSet per subcommand whose usage text lists every
// flag with its environment variable, flags and operands in any order, every
// flag also settable as SEQD_<NAME> (the command line wins), usage errors
// that exit with status 2, the one way a failed call is printed, and the
// reading of a CA bundle a flag names.
//
// It parses and reports; it never dials a server.
package cli
