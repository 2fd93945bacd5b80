package fsm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/seqd/seqd"
)

func TestSpaceChangeCodec(t *testing.T) {
	for _, tt := range []struct {
		name string
		data []byte
		want Command
	}{
		{"update", EncodeUpdateSpace("users", 2000), Command{Kind: KindUpdateSpace, Space: seqd.Space{Name: "users", Step: 2000}}},
		{"update extremes", EncodeUpdateSpace("", 1<<64-1), Command{Kind: KindUpdateSpace, Space: seqd.Space{Step: 1<<64 - 1}}},
		{"delete", EncodeDeleteSpace("users"), Command{Kind: KindDeleteSpace, Space: seqd.Space{Name: "users"}}},
	} {
		got, err := Decode(tt.data)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Fatalf("%s: Decode = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
		if re := encode(got); !bytes.Equal(re, tt.data) {
			t.Fatalf("%s: re-encoded %x, want %x", tt.name, re, tt.data)
		}
	}
	for name, data := range map[string][]byte{
		"update without step":   EncodeUpdateSpace("users", 1)[:7],
		"update trailing":       append(EncodeUpdateSpace("users", 1), 0),
		"update name truncated": {byte(KindUpdateSpace), 9, 'a'},
		"delete without name":   {byte(KindDeleteSpace)},
		"delete trailing":       append(EncodeDeleteSpace("users"), 1),
	} {
		if c, err := Decode(data); err == nil {
			t.Errorf("%s: Decode(%x) = %+v, want an error", name, data, c)
		}
	}
}

// TestSpaceChanges applies space changes one after the other, as the log
// does, and checks each answer and the state after it.
func TestSpaceChanges(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	var hooked []string
	f.SetSpaceHook(func(name string) { hooked = append(hooked, name) })
	users := seqd.Space{Name: "users", Step: 100, SectionSize: 1000}
	a.mustOK(EncodeCreateSpace(seqd.DefaultSpace))
	a.mustOK(EncodeCreateSpace(users))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 2, Max: 5000}}))
	type want struct {
		err     error             // the answer
		live    []seqd.Space      // Spaces() after it
		deleted map[string]uint64 // Deleted's section size per deleted space
		max     uint64            // Max("users", 2) after it
	}
	live := func(ss ...seqd.Space) []seqd.Space { return append([]seqd.Space{seqd.DefaultSpace}, ss...) }
	step := func(s seqd.Space, n uint64) seqd.Space { s.Step = n; return s }
	for _, st := range []struct {
		name string
		cmd  []byte
		want want
	}{
		{"update the step", EncodeUpdateSpace("users", 2000), want{nil, live(step(users, 2000)), nil, 5000}},
		{"update to the same step", EncodeUpdateSpace("users", 2000), want{nil, live(step(users, 2000)), nil, 5000}},
		{"update to step 0", EncodeUpdateSpace("users", 0), want{seqd.ErrInvalidSpace, live(step(users, 2000)), nil, 5000}},
		{"update above the limit", EncodeUpdateSpace("users", seqd.MaxStep+1), want{seqd.ErrInvalidSpace, live(step(users, 2000)), nil, 5000}},
		{"update an unknown space", EncodeUpdateSpace("nope", 5), want{seqd.ErrUnknownSpace, live(step(users, 2000)), nil, 5000}},
		{"delete the default space", EncodeDeleteSpace(seqd.DefaultSpaceName), want{seqd.ErrInvalidArgument, live(step(users, 2000)), nil, 5000}},
		{"delete an unknown space", EncodeDeleteSpace("nope"), want{seqd.ErrUnknownSpace, live(step(users, 2000)), nil, 5000}},
		{"delete", EncodeDeleteSpace("users"), want{nil, live(), map[string]uint64{"users": 1000}, 5000}},
		{"delete again", EncodeDeleteSpace("users"), want{nil, live(), map[string]uint64{"users": 1000}, 5000}},
		{"update a deleted space", EncodeUpdateSpace("users", 7), want{seqd.ErrUnknownSpace, live(), map[string]uint64{"users": 1000}, 5000}},
		{"a raise of a deleted space", EncodeRaise([]seqd.Mark{{Space: "users", Section: 2, Max: 6000}}), want{nil, live(), map[string]uint64{"users": 1000}, 6000}},
		{"create again with another section size", EncodeCreateSpace(seqd.Space{Name: "users", Step: 5, SectionSize: 10}), want{seqd.ErrSpaceExists, live(), map[string]uint64{"users": 1000}, 6000}},
		{"create again", EncodeCreateSpace(step(users, 7)), want{nil, live(step(users, 7)), nil, 6000}},
		{"create the same again", EncodeCreateSpace(step(users, 7)), want{nil, live(step(users, 7)), nil, 6000}},
	} {
		err := respErr(t, a.apply(st.cmd))
		if !errors.Is(err, st.want.err) || (err == nil) != (st.want.err == nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want.err)
		}
		if got := f.Spaces(); !reflect.DeepEqual(got, st.want.live) {
			t.Fatalf("%s: Spaces() = %+v, want %+v", st.name, got, st.want.live)
		}
		size, deleted := f.Deleted("users")
		if _, want := st.want.deleted["users"]; deleted != want || (deleted && size != st.want.deleted["users"]) {
			t.Fatalf("%s: Deleted(users) = %d, %v", st.name, size, deleted)
		}
		if _, ok := f.Space("users"); ok == deleted {
			t.Fatalf("%s: Space(users) found %v while deleted %v", st.name, ok, deleted)
		}
		if got := f.Max("users", 2); got != st.want.max {
			t.Fatalf("%s: Max(users, 2) = %d, want %d (a delete keeps the marks)", st.name, got, st.want.max)
		}
	}
	// The hook heard of every change that changed something.
	if want := []string{"default", "users", "users", "users", "users"}; !slices.Equal(hooked, want) {
		t.Fatalf("space hook calls %q, want %q", hooked, want)
	}
}

// TestDeletedSpaceSurvives: a deleted space stays deleted, with its section
// size and marks, after a reopen and in a snapshot installed elsewhere.
func TestDeletedSpaceSurvives(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "gone", Step: 10, SectionSize: 50}))
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "kept", Step: 10, SectionSize: 50}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "gone", Section: 1, Max: 700}}))
	a.mustOK(EncodeUpdateSpace("kept", 30))
	a.mustOK(EncodeDeleteSpace("gone"))
	check := func(g *FSM, where string) {
		t.Helper()
		if size, ok := g.Deleted("gone"); !ok || size != 50 || g.Max("gone", 1) != 700 {
			t.Fatalf("%s: Deleted = %d, %v; Max = %d", where, size, ok, g.Max("gone", 1))
		}
		if sp, ok := g.Space("kept"); !ok || sp.Step != 30 {
			t.Fatalf("%s: kept = %+v, %v", where, sp, ok)
		}
	}
	data := snapshotBytes(t, f)
	other, _ := openTest(t)
	var hooked []string
	other.SetSpaceHook(func(name string) { hooked = append(hooked, name) })
	if err := other.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	check(other, "installed snapshot")
	if !slices.Equal(hooked, []string{""}) {
		t.Fatalf("a snapshot install called the space hook with %q, want one call for every space", hooked)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	check(g, "reopened")
}

// withoutKinds applies entries as a build that does not know kinds does:
// Decode still reads them, Apply finds no registry entry and skips them as
// ignorable.
func withoutKinds(t *testing.T, kinds ...Kind) {
	t.Helper()
	saved := map[Kind]command{}
	for _, k := range kinds {
		saved[k] = commands[k]
		delete(commands, k)
	}
	t.Cleanup(func() {
		for k, c := range saved {
			commands[k] = c
		}
	})
}

// TestSpaceChangesSkippedByAnOlderBuild: a replica of a build that skips
// the space changes (and a floor's raise, which it applies) ends with the
// same marks as one that applies them, at every section: whichever of the
// two leads next starts every section at the same mark, so no value is
// handed out twice. What differs is only what the skipping replica lists
// (the deleted space, the old step), which is why leaders write these
// kinds only once every server applies them.
func TestSpaceChangesSkippedByAnOlderBuild(t *testing.T) {
	log := [][]byte{
		EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 10}),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 0, Max: 100}, {Space: "users", Section: 1, Max: 200}}),
		EncodeUpdateSpace("users", 5000),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 0, Max: 5100}}),      // under the new step
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 1_000_000}}), // a floor (SetFloor)
		EncodeDeleteSpace("users"),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 0, Max: 5200}}), // a raise in flight as it was deleted
		EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 10}),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 2, Max: 300}}),
	}
	run := func() *FSM {
		f, _ := openTest(t)
		a := &applier{t: t, f: f}
		for _, e := range log {
			if err := respErr(t, a.apply(e)); err != nil {
				t.Fatalf("entry %x: %v", e, err)
			}
		}
		return f
	}
	now := run()
	withoutKinds(t, KindUpdateSpace, KindDeleteSpace)
	older := run()
	for sec := uint64(0); sec < 4; sec++ {
		if a, b := now.Max("users", sec), older.Max("users", sec); a != b {
			t.Fatalf("section %d: mark %d here, %d on the replica that skipped the space changes", sec, a, b)
		}
	}
	if got := older.Max("users", 1); got != 1_000_000 {
		t.Fatalf("the floor's raise: %d on the older replica, want 1000000", got)
	}
	if sp, _ := older.Space("users"); sp.Step != 100 {
		t.Fatalf("older replica's step %d (it skipped the update)", sp.Step)
	}
}

// TestDeletedSpaceInABackup: a restore raises a deleted space's marks by
// the margin like any other's and keeps it deleted; created again, it
// continues above them.
func TestDeletedSpaceInABackup(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "gone", Step: 10, SectionSize: 100}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "gone", Section: 3, Max: 400}}))
	a.mustOK(EncodeDeleteSpace("gone"))
	path := filepath.Join(t.TempDir(), "backup.db")
	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(path, RestoreOptions{Margin: 1000, ClusterID: "new"}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.Deleted("gone"); !ok {
		t.Fatal("the restored space is not deleted")
	}
	b := &applier{t: t, f: r}
	b.mustOK(EncodeCreateSpace(seqd.Space{Name: "gone", Step: 5, SectionSize: 100}))
	if got := r.Max("gone", 3); got != 1400 {
		t.Fatalf("the restored deleted space's mark: %d, want 400 + the margin 1000", got)
	}
}
