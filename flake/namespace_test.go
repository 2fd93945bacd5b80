package flake

import (
	"errors"
	"testing"

	"github.com/seqd/seqd"
)

func TestValidateNamespace(t *testing.T) {
	snow, _ := Preset("snowflake")
	insta, _ := Preset("instagram")
	narrow := Layout{EpochMs: DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 20, WorkerBits: 1, SequenceBits: 1}
	for _, c := range []struct {
		name, obf string
		l         Layout
		ok        bool
	}{
		{"ids", ObfuscateNone, snow, true},
		{"ids", ObfuscateFF1, snow, true},
		{"ids", ObfuscateFF1Hour, snow, true},
		{"ids", ObfuscateNone, insta, true},
		{"ids", ObfuscateFF1, insta, false},     // a shard field is meant to be read
		{"ids", "fields", snow, false},          // GetLayoutResponse's marker, no setting
		{"ids", "rot13", snow, false},           // unknown obfuscation
		{"ids", ObfuscateNone, Layout{}, false}, // invalid layout
		{"ids", ObfuscateNone, narrow, true},
		{"", ObfuscateNone, snow, false},
		{"Ids", ObfuscateNone, snow, false},
		{"-ids", ObfuscateNone, snow, false},
	} {
		err := ValidateNamespace(c.name, c.l, c.obf)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, seqd.ErrInvalidNamespace)) {
			t.Errorf("ValidateNamespace(%q, %v, %q) = %v, want ok %v (or ErrInvalidNamespace)", c.name, c.l, c.obf, err, c.ok)
		}
	}
}
