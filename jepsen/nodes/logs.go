package nodes

import (
	"io"
	"os"
	"strings"
)

// LogSize returns the current size of the node's log file (an offset for
// LogSince).
func (n *Node) LogSize() int64 {
	fi, err := os.Stat(n.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogContains reports whether the node's log, from offset on, contains s.
func (n *Node) LogContains(offset int64, s string) bool {
	f, err := os.Open(n.LogPath)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return false
	}
	b, err := io.ReadAll(f)
	return err == nil && strings.Contains(string(b), s)
}

// LogSince returns the node's log from offset on.
func (n *Node) LogSince(offset int64) string {
	f, err := os.Open(n.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// LogCount counts the lines of the node's log, from offset on, that
// contain s.
func (n *Node) LogCount(offset int64, s string) int {
	c := 0
	for _, line := range strings.Split(n.LogSince(offset), "\n") {
		if strings.Contains(line, s) {
			c++
		}
	}
	return c
}

// LogLines returns the lines of the node's log, from offset on, that start
// with one of prefixes (e.g. "panic: ").
func (n *Node) LogLines(offset int64, prefixes ...string) []string {
	var out []string
	for _, line := range strings.Split(n.LogSince(offset), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}
