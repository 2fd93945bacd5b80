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
