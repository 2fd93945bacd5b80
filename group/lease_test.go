package group

import (
	"testing"
	"time"
)

// The noted time of the last stored renewal never goes back.
func TestNoteLeaseNeverGoesBack(t *testing.T) {
	g := &Group{origin: time.Now()}
	g.noteLease()
	first := g.leaseSeen.Load()
	g.leaseSeen.Store(first + int64(time.Hour)) // a later note, as a racing writer would leave it
	g.noteLease()
	if got := g.leaseSeen.Load(); got != first+int64(time.Hour) {
		t.Fatalf("noteLease moved the note back from %d to %d", first+int64(time.Hour), got)
	}
}
