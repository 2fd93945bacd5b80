package resp

import (
	"testing"

	"github.com/seqd/seqd"
)

func TestCommandName(t *testing.T) {
	for in, want := range map[string]string{
		"INCR": "INCR", "incr": "INCR", "iNcR": "INCR", "GET": "GET", "get": "GET", "mGet": "MGET",
		"INCRBY": "INCRBY", "incrby": "INCRBY", "INC": "INC", "ping": "PING", "": "",
		"\x09NCR": "\x09NCR", "i\x0eCR": "I\x0eCR", "GE\x14": "GE\x14", // bytes a bit away from a letter are not it
	} {
		if got := commandName([]byte(in)); got != want {
			t.Errorf("commandName(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = commandName([]byte("incr")) }); n != 0 {
		t.Errorf("commandName of INCR allocates %v times", n)
	}
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "7": 7, "000012": 12, "18446744073709551615": 1<<64 - 1} {
		if v, ok := parseDecimal([]byte(in)); !ok || v != want {
			t.Errorf("parseDecimal(%q) = %d, %v; want %d", in, v, ok, want)
		}
	}
	for _, in := range []string{"", "+1", "-1", "1a", " 1", "1 ", "18446744073709551616", "99999999999999999999", "1_000"} {
		if v, ok := parseDecimal([]byte(in)); ok {
			t.Errorf("parseDecimal(%q) = %d, want an error", in, v)
		}
	}
}

func TestSpaceCacheAnswersAsForeignName(t *testing.T) {
	var c spaceCache
	for _, raw := range []string{"Orders", "Orders", "orders", "", "a..b", "Orders", "x"} {
		got, err := c.name([]byte(raw))
		want, werr := seqd.ForeignName(raw)
		if got != want || (err == nil) != (werr == nil) {
			t.Errorf("name(%q) = %q, %v; seqd.ForeignName: %q, %v", raw, got, err, want, werr)
		}
	}
}

// A connection's arena serves read after read: the commands of one read and
// their keys never share memory, whatever the reads' sizes, and a read
// larger than a connection keeps room for gives its memory back.
func TestArenaKeepsEachReadsCommandsApart(t *testing.T) {
	var a arena
	for _, n := range []int{5, 40, 700, 3000, 2, 1500, 9} {
		ps := make([]*pending, n)
		for i := range ps {
			k := i%3 + 1
			if i%500 == 7 {
				k = 1000 // an MGET of many keys
			}
			p := a.pending(k)
			for j := range k {
				p.keys = append(p.keys, key{key: uint64(i*10000 + j)})
			}
			p.vals = []uint64{uint64(i)}
			ps[i] = p
		}
		for i, p := range ps {
			if p.vals[0] != uint64(i) {
				t.Fatalf("read of %d: command %d's reply was overwritten", n, i)
			}
			for j, k := range p.keys {
				if k.key != uint64(i*10000+j) {
					t.Fatalf("read of %d: command %d's key %d is %d", n, i, j, k.key)
				}
			}
		}
		a.reset()
		if len(a.ps) != 0 || cap(a.ps) > keptCommands || cap(a.keys) > keptKeys {
			t.Fatalf("after a read of %d: %d commands kept, room for %d and %d keys", n, len(a.ps), cap(a.ps), cap(a.keys))
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		for range 8 {
			a.pending(1).keys = append(a.pending(1).keys, key{key: 1})
		}
		a.reset()
	}); n != 0 {
		t.Errorf("a read of 8 INCRs allocates %v times once the arena is warm", n)
	}
}
