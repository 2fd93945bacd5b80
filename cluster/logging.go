package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// logWriter forwards the line-oriented logs of raft (hclog) and memberlist
// (log.Logger with "[LEVEL]" prefixes) to slog, dropping lines below min.
type logWriter struct {
	log       *slog.Logger
	component string
	min       slog.Level

	mu  sync.Mutex
	buf []byte
}

func newLogWriter(l *slog.Logger, component string, min slog.Level) *logWriter {
	return &logWriter{log: l, component: component, min: min}
}

func (w *logWriter) Write(p []byte) (int, error) {
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

func (w *logWriter) emit(line string) {
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
	if level < w.min {
		return
	}
	w.log.Log(context.Background(), level, line, "component", w.component)
}

func hclogLevel(l slog.Level) string {
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

func newHCLogger(w *logWriter, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.LevelFromString(hclogLevel(w.min)),
		Output:      w,
		DisableTime: true,
	})
}
