package logbridge

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRoutineElectionIsInfo: raft's first election after a start (no
// leader known yet) is logged at INFO, so the default --raft-log-level warn
// hides it; the same line after a leader was known stays a WARN, and other
// warnings are untouched.
func TestRoutineElectionIsInfo(t *testing.T) {
	for _, c := range []struct {
		line, want string
	}{
		{"[WARN]  raft: heartbeat timeout reached, starting election: last-leader-addr= last-leader-id=", ""},
		{"[WARN]  raft: heartbeat timeout reached, starting election: last-leader-addr=127.0.0.1:7711 last-leader-id=n1", "level=WARN"},
		{"[WARN]  raft: failed to contact: server-id=n2 time=1s", "level=WARN"},
		{"[ERROR] raft: failed to appendEntries to: peer=n2", "level=ERROR"},
	} {
		var out bytes.Buffer
		w := NewWriter(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft", slog.LevelWarn)
		_, _ = w.Write([]byte(c.line + "\n"))
		if got := out.String(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%q logged %q, want %q", c.line, got, c.want)
		}
		out.Reset()
		w = NewWriter(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft", slog.LevelInfo)
		_, _ = w.Write([]byte(c.line + "\n"))
		if c.want == "" && !strings.Contains(out.String(), "level=INFO") {
			t.Errorf("%q at --raft-log-level info: %q, want an INFO line", c.line, out.String())
		}
	}
}
