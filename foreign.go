package seqd

import (
	"fmt"
	"strconv"
	"strings"
)

// ForeignName returns the space (or flake namespace) that a name from
// another system maps to: a Leaf biz_tag in GET /api/segment/get/{tag}, the
// prefix of a Redis key. Such names often have upper-case letters, which
// space names never have (ValidName), and every build of seqd, older ones
// included, validates names in its state machine and when it opens its data
// file, so seqd maps them instead of widening ValidName (DESIGN.md, section
// 12): one-to-one, and leaving every valid name as it is.
//
//   - A name that is already a valid space name, and has no "..", is
//     itself: tag "orders" is space "orders".
//   - A name with upper-case letters (and otherwise the characters of a space
//     name, starting with a letter or digit, no "..") is its lower-case form,
//     "..", and the 0-based positions of its upper-case letters joined by
//     ".": "MyTag" is "mytag..0.2", "ORDER" is "order..0.1.2.3.4".
//   - Anything else (another character, "..", a mapped name over 64
//     characters) is refused with ErrInvalidArgument.
//
// It is one-to-one: a mapped name with ".." in it comes only from a name
// with upper-case letters (names with ".." are refused), and the part after
// ".." restores them.
func ForeignName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrInvalidArgument)
	}
	if strings.Contains(name, "..") {
		return "", fmt.Errorf("%w: name %q: \"..\" is reserved for names with upper-case letters", ErrInvalidArgument, name)
	}
	var upper []int
	lower := []byte(name)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper = append(upper, i)
			lower[i] = c + ('a' - 'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return "", fmt.Errorf("%w: name %q: use letters, digits, '_', '.' and '-', starting with a letter or digit", ErrInvalidArgument, name)
		}
	}
	out := string(lower)
	if len(upper) > 0 {
		var b strings.Builder
		b.WriteString(out)
		b.WriteString("..")
		for i, p := range upper {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strconv.Itoa(p))
		}
		out = b.String()
	}
	if len(out) > MaxNameLen {
		return "", fmt.Errorf("%w: name %q maps to %q, longer than %d characters", ErrInvalidArgument, name, out, MaxNameLen)
	}
	return out, nil
}
