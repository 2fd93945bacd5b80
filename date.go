package seqd

import "time"

// Date writes Unix milliseconds as a UTC date with milliseconds
// (2026-01-13T10:15:41.824Z), the way every message for people shows an
// instant: errors, logs and command output never print raw Unix ms.
func Date(unixMs int64) string {
	return time.UnixMilli(unixMs).UTC().Format("2006-01-02T15:04:05.000Z")
}
