package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Contact records: whether a server was current in a group when it last
// stopped. Admission without a leader counts the answers of current voters
// (admit.Answer.Current): a voter that is admitted now, or that had heard
// from a leader of the group until shortly before it last stopped. Such a
// voter holds the group's progress records up to then, so an older copy of
// another server's data directory is found by it even after a full-cluster
// restart; a voter that had been cut off from the leaders for long before
// it stopped (it lagged) holds no record of what it missed, and counts only
// under the rule that needs every record's holders (admit, everyRecord).
//
// Every contactEvery, each group's directory gets a file contactFile: this
// server's wall clock then and when it last heard from the group's leader
// (or led it), in Unix ms. It is replaced atomically and not synced: after
// a power loss it holds an earlier pair, which tells the same, or nothing.

// contactFile names the file in each group's directory.
const contactFile = "contact"

// contactEvery is how often the files are written.
const contactEvery = time.Second

// freshGap is how long before it stopped a server may last have heard from
// a leader of a group and still count as current in it when it comes back:
// a few heartbeats and one election.
const freshGap = 3 * time.Second

// readContact reads group directory dir's contact record and reports
// whether the server was current in the group when it stopped.
func readContact(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, contactFile))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return false
	}
	alive, err1 := strconv.ParseInt(f[0], 10, 64)
	contact, err2 := strconv.ParseInt(f[1], 10, 64)
	return err1 == nil && err2 == nil && contact > 0 && alive >= contact && alive-contact <= freshGap.Milliseconds()
}

// writeContacts records, for every group, when this server last heard
// from the group's leader (see above). It runs on the host loop every
// contactEvery, and once more when the server stops gracefully.
func (n *Node) writeContacts(force bool) {
	if !force && time.Since(n.contactWritten) < contactEvery {
		return
	}
	n.contactWritten = time.Now()
	now := time.Now()
	for i, g := range n.groups {
		if !n.GroupAdmitted(i) {
			// Its log has not changed since the record was written (no
			// raft traffic passes a shut gate): the record stands, across
			// any number of restarts.
			continue
		}
		var contact time.Time
		if r := g.Raft(); r.State() == raft.Leader {
			contact = now
		} else {
			contact = r.LastContact()
		}
		var ms int64
		if !contact.IsZero() {
			ms = now.UnixMilli() - now.Sub(contact).Milliseconds()
		}
		data := fmt.Sprintf("%d %d\n", now.UnixMilli(), ms)
		if err := writeAtomic(groupDir(n.cfg.DataDir, i), contactFile, []byte(data)); err != nil {
			n.log.Debug("writing the contact record", "group", i, "err", err)
		}
	}
}

// currentIn reports whether this server counts as current in group i for
// another server's admission (see above).
func (n *Node) currentIn(i int) bool {
	return n.GroupAdmitted(i) || n.freshAtStart[i]
}

// writeAtomic replaces dir/name with data (a temporary file renamed over
// it), without syncing.
func writeAtomic(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
