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

// Contact records: when a server last heard from a leader of each group.
// Admission without a leader admits on the answer of a voter that heard
// from a leader of the group no earlier than the asking server did (admit,
// witnessed): such a voter holds every record the group's leaders wrote of
// the asking server's log (they describe what it acknowledged, and it
// acknowledged nothing after its last contact), so an older copy of the
// asking server's data directory is found by it, even after a full-cluster
// restart. A voter that lost touch with the leaders before the asking
// server did (it lagged) may miss such a record; it counts toward a
// majority with the asking server (admit, majorityAnswered).
//
// Every contactEvery, while the server is admitted in a group, the group's
// directory gets a file contactFile: this server's wall clock then and
// when it last heard from the group's leader (or led it), in Unix ms. It is
// replaced atomically and not synced: after a power loss it holds an
// earlier pair, which only makes the server look as if it lost touch
// earlier. A server that restarts answers with the recorded contact until
// it is admitted again (a shut gate passes no raft traffic, so its log has
// not changed since).

// contactFile names the file in each group's directory.
const contactFile = "contact"

// contactEvery is how often the files are written: well within
// admit.ContactSlack.
const contactEvery = 500 * time.Millisecond

// readContact reads group directory dir's contact record: when the server
// last heard from a leader of the group, in Unix ms (0: no record).
func readContact(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, contactFile))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	alive, err1 := strconv.ParseInt(f[0], 10, 64)
	contact, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || contact <= 0 || alive < contact {
		return 0
	}
	return contact
}

// writeContacts notes when this server last heard from each group's
// leader and records it in the group's directory (see above). A server
// that leads counts now; a follower counts raft's last contact while it
// knows a leader (raft also counts a vote it grants as contact, which says
// nothing of the records it holds: without a known leader the time stays
// where it was). Groups it is not admitted in keep their record.
func (n *Node) writeContacts() {
	now := time.Now()
	for i, g := range n.groups {
		if !n.GroupAdmitted(i) {
			// Its log has not changed since the record was written (no
			// raft traffic passes a shut gate): the record stands, across
			// any number of restarts.
			continue
		}
		r := g.Raft()
		switch {
		case r.State() == raft.Leader:
			n.contacts[i].Store(now.UnixMilli())
		case r.Leader() != "":
			if lc := r.LastContact(); !lc.IsZero() {
				n.contacts[i].Store(now.UnixMilli() - now.Sub(lc).Milliseconds())
			}
		}
		data := fmt.Sprintf("%d %d\n", now.UnixMilli(), n.contactMs(i))
		if err := writeAtomic(groupDir(n.cfg.DataDir, i), contactFile, []byte(data)); err != nil {
			n.log.Debug("writing the contact record", "group", i, "err", err)
		}
	}
}

// contactMs is when this server last heard from a leader of group i (or
// led it), in Unix ms (0: never): as tracked while it is admitted in the
// group, its record from before its last stop until then.
func (n *Node) contactMs(i int) int64 {
	if c := n.contacts[i].Load(); c > 0 && n.GroupAdmitted(i) {
		return c
	}
	return n.recordedContact[i]
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
