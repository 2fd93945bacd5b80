// Package logbridge forwards the logs of hashicorp/raft (hclog) and
// hashicorp/memberlist (a log.Logger writing "[LEVEL] ..." lines) to slog,
// so that every line seqd writes goes through one structured logger.
package logbridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Writer forwards the line-oriented logs of raft (hclog) and memberlist
// (log.Logger with "[LEVEL]" prefixes) to slog, dropping lines below min.
type Writer struct {
	log       *slog.Logger
	component string
	min       slog.Level

	mu  sync.Mutex
	buf []byte
}

// NewWriter returns a Writer that logs to l with component=component and
// drops lines below min.
func NewWriter(l *slog.Logger, component string, min slog.Level) *Writer {
	return &Writer{log: l, component: component, min: min}
}

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *Writer) emit(line string) {
	level := slog.LevelInfo
	for tag, l := range map[string]slog.Level{
		"[TRACE]": slog.LevelDebug - 4, "[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo,
		"[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError, "[ERROR]": slog.LevelError,
	} {
		if j := strings.Index(line, tag); j >= 0 {
			level = l
			line = strings.TrimSpace(line[j+len(tag):])
			break
		}
	}
	if level == slog.LevelWarn && routine(line) {
		level = slog.LevelInfo
	}
	if level < w.min {
		return
	}
	w.log.Log(context.Background(), level, line, "component", w.component)
}

// routine reports whether a line raft logs at WARN is the normal course of
// a start rather than a fault: the first election of a server that has
// heard from no leader since it started ("heartbeat timeout reached,
// starting election" with an empty last-leader-id), which every start of a
// single node or a whole cluster logs. Such lines are logged at INFO (and so
// dropped at the default --raft-log-level warn); after a leader was known,
// the same line names it and stays a WARN.
func routine(line string) bool {
	return strings.Contains(line, "heartbeat timeout reached, starting election") &&
		strings.HasSuffix(strings.TrimSpace(line), "last-leader-id=")
}

// HCLevel is the hclog level name of an slog level.
func HCLevel(l slog.Level) string {
	switch {
	case l <= slog.LevelDebug:
		return hclog.Debug.String()
	case l <= slog.LevelInfo:
		return hclog.Info.String()
	case l <= slog.LevelWarn:
		return hclog.Warn.String()
	default:
		return hclog.Error.String()
	}
}

// NewHCLogger returns an hclog.Logger named name that writes through w.
func NewHCLogger(w *Writer, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.LevelFromString(HCLevel(w.min)),
		Output:      w,
		DisableTime: true,
	})
}
