package resp

import (
	"errors"
	"strings"

	"connectrpc.com/connect"
)

// errorReply turns a Backend error (a Connect error: api's one map of
// errors to codes already hid internal text) into a Redis error reply:
//
//   - unavailable and deadline_exceeded: "TRYAGAIN ..." (no serving leader
//     for the key's group within the Backend's retries, a leader still
//     waiting out its predecessor's lease, a leader that did not answer):
//     retrying is safe, a retry may leave a gap but never repeats a value;
//   - every other code: "ERR ..." with the error's text (an unknown space,
//     a value past 2^63-1, ...).
func errorReply(err error) string {
	var msg string
	if ce := (*connect.Error)(nil); errors.As(err, &ce) {
		msg = ce.Message()
	} else {
		msg = err.Error()
	}
	msg = oneLine(msg)
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return "TRYAGAIN " + msg
	case connect.CodeInternal, connect.CodeUnknown:
		return "ERR internal error"
	case connect.CodeNotFound:
		return "ERR " + msg + " (create it with: seqd space create NAME)"
	}
	return "ERR " + msg
}

// oneLine makes msg fit a simple error reply (no CR or LF).
func oneLine(msg string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
}

// wrongArgs is Redis's reply to a command with the wrong number of
// arguments.
func wrongArgs(name string) string {
	return "ERR wrong number of arguments for '" + strings.ToLower(name) + "' command"
}
