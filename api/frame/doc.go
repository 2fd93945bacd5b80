// Package frame is NextStream's framed transport on the wire, written once
// for its three users: the server's side (api/frames.go), the Go client's
// streams (client/frames.go), and the forwards of the front ends' shares
// from one server to a group's leader (api/fwdstream.go).
//
// The transport: an HTTP/1.1 POST for the NextStream procedure's path asks
// to upgrade to seqd.StreamUpgrade; a server that answers 101 then reads
// NextStreamRequest messages and writes NextStreamResponse messages on the
// connection, each as an unsigned varint length and the message (Append,
// Read). Dial opens the connection (TCP, or TLS offering HTTP/1.1 only),
// Upgrade asks for the upgrade, and Refused names the Connect code of an
// upgrade the server did not grant.
//
// It lives apart from api/ because client/ never imports api/. It imports
// only the root package, the generated seq/v1 code and connect.
//
// # What it never does
//
// It never decides what a message means (the server serves each as a unary
// Next, the callers map answers to errors), and never changes the wire:
// every byte it writes is the one the transport wrote before it existed.
package frame
