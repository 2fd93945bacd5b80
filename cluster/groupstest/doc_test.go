// Package groupstest_test tests clusters of several raft groups and the
// lease handoff end to end (real raft groups, real bbolt files, real
// listeners on 127.0.0.1). It is a package of its own so that its tests run
// next to cluster's, not after them.
package groupstest_test

import "time"

// failoverWait bounds every wait for a serving leader; generous, as the
// machine may be loaded.
const failoverWait = 45 * time.Second
