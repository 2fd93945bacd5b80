// Package idmsg converts between the IdService and AdminService messages
// of flake ids (api/gen/seq/v1) and flake's types, written once for the
// server (api/) and the Go client (client/): layouts, namespaces, grants,
// runs of ids, and the Connect codes a holder acts on.
//
// It lives apart from api/ because client/ never imports api/, apart from
// flake/ because flake/ is pure (the standard library, the root package and
// bootclock/ only), and apart from api/gen/ because that tree is generated
// (buf generate cleans it). It imports only the root package, flake/,
// the generated seq/v1 messages and connect.
//
// # What it never does
//
// It never calls a server, never decides anything a conversion does not
// need, and never changes the wire: every message it writes is the one the
// handlers wrote before it existed.
package idmsg
