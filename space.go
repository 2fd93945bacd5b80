package seqd

import (
	"fmt"
	"math"
)

// Space is a named family of sequences: one monotonic sequence per key.
// Step is how far the leader raises a section's high-water mark at a time,
// and SectionSize is how many consecutive keys share one section
// (section = key / SectionSize). A space's step may change after it is
// created (UpdateSpace); its section size never does, not even across a
// delete and a create under the same name, since a key's section, and the
// mark that covers its values, is key / SectionSize.
type Space struct {
	Name        string
	Step        uint64
	SectionSize uint64
}

// Mark says that section Section of space Space has (or, in a raise, must
// have at least) the high-water mark Max: no value above Max has been handed
// out for any key of the section.
type Mark struct {
	Space   string
	Section uint64
	Max     uint64
}

// Defaults for a space created without settings, and the space a request
// that names none uses. The first leader of a new cluster creates
// DefaultSpace.
const (
	DefaultSpaceName   = "default"
	DefaultStep        = 10000
	DefaultSectionSize = 100000
)

// DefaultSpace is the space created by the first leader of a new cluster.
var DefaultSpace = Space{Name: DefaultSpaceName, Step: DefaultStep, SectionSize: DefaultSectionSize}

// MaxValue is the largest value a sequence ever reaches (2^63-1). A call that
// would need a larger value fails with ErrExhausted; values never wrap.
const MaxValue = math.MaxInt64

// MaxStep is the largest permitted Space.Step.
const MaxStep = 1 << 40

// MaxNameLen is the longest permitted space name.
const MaxNameLen = 64

// ValidName reports whether name is a valid space name, that is whether it
// matches ^[a-z0-9][a-z0-9_.-]{0,63}$.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidateSpace returns nil if s may be created, and otherwise an error that
// wraps ErrInvalidSpace and says what is wrong. A valid space has a name
// accepted by ValidName, 1 <= Step <= 1<<40 and SectionSize >= 1.
func ValidateSpace(s Space) error {
	switch {
	case !ValidName(s.Name):
		return fmt.Errorf("%w: name %q must match ^[a-z0-9][a-z0-9_.-]{0,63}$", ErrInvalidSpace, s.Name)
	case s.Step < 1 || s.Step > MaxStep:
		return fmt.Errorf("%w: step %d must be in [1, 2^40]", ErrInvalidSpace, s.Step)
	case s.SectionSize < 1:
		return fmt.Errorf("%w: section size must be at least 1", ErrInvalidSpace)
	}
	return nil
}

// SpaceConflict is the error of creating space asked again when it exists
// as stored with other settings: it names both, so the caller sees what to
// change (ErrSpaceExists).
func SpaceConflict(stored, asked Space) error {
	return fmt.Errorf("%w: %q has step %d and section_size %d; this call asked for step %d and section_size %d",
		ErrSpaceExists, stored.Name, stored.Step, stored.SectionSize, asked.Step, asked.SectionSize)
}
