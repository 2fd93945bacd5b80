package sections

import "sync/atomic"

// keyCount counts the keys held in the sections of one lease epoch. Each
// section keeps the counter that was current when it was loaded (under
// Allocator.mu), and Revoke replaces the allocator's counter under the same
// lock as it drops the sections. A call that passed the lease check before a
// Revoke may still add keys to (or evict keys from) a section that the Revoke
// dropped; it then updates that earlier epoch's detached counter, so KeysHeld
// is exactly the number of keys held in the current epoch's sections.
type keyCount struct{ n atomic.Int64 }

// A section of an unbounded allocator holds its keys in a map until they
// are denseShare of its keys or more; then in an array indexed by the key's
// offset in the section (0: not held), which costs no more memory than the
// map did (8 bytes a key of the section against some 30 a held key) and
// one memory access a key instead of a map's probe. Sections larger than
// maxDense keys stay maps.
const (
	denseShare = 4
	maxDense   = 1 << 20 // 8 MiB
)

// denseAt is how many keys a section of this space holds before its array
// replaces its map (0: never).
func denseAt(sectionSize uint64) int {
	if sectionSize > maxDense {
		return 0
	}
	return int(max(1, sectionSize/denseShare))
}

// offset is key's index in the section's array.
func (s *section) offset(key uint64) uint64 { return key - s.id*s.space.sectionSize }

// held is how many keys the section holds.
func (s *section) held() int { return len(s.young) + len(s.old) + s.denseN }

func (s *section) get(key uint64) uint64 {
	if s.dense != nil {
		if v := s.dense[s.offset(key)]; v != 0 {
			return v
		}
		return s.floor
	}
	if v, ok := s.young[key]; ok {
		return v
	}
	if v, ok := s.old[key]; ok {
		return v
	}
	return s.floor
}

// set records v as key's current value, evicting the older generation of
// keys when the section is over its bound. Call with sec.mu held.
func (a *Allocator) set(s *section, key, v uint64) {
	limit := a.opts.MaxKeysPerSection
	if limit <= 0 {
		// Unbounded: one generation, one map operation, or an array.
		if s.dense != nil {
			i := s.offset(key)
			if s.dense[i] == 0 {
				s.denseN++
				s.keys.n.Add(1)
			}
			s.dense[i] = v // never 0: a value taken or a floor set is at least 1
			return
		}
		n := len(s.young)
		s.young[key] = v
		if len(s.young) != n {
			s.keys.n.Add(1)
			if at := s.space.denseAt; at > 0 && len(s.young) >= at {
				s.toDense()
			}
		}
		return
	}
	if _, ok := s.young[key]; ok {
		s.young[key] = v
		return
	}
	if s.old != nil {
		if _, ok := s.old[key]; ok {
			delete(s.old, key)
			s.young[key] = v
			return
		}
	}
	if len(s.young) >= (limit+1)/2 {
		// Evict the older generation: floor first covers each evicted value.
		for _, ov := range s.old {
			if ov > s.floor {
				s.floor = ov
			}
		}
		s.keys.n.Add(-int64(len(s.old)))
		s.old = s.young
		s.young = make(map[uint64]uint64, len(s.old))
	}
	s.young[key] = v
	s.keys.n.Add(1)
}

// toDense moves the section's keys from its map to its array.
func (s *section) toDense() {
	s.dense = make([]uint64, s.space.sectionSize)
	for k, v := range s.young {
		s.dense[s.offset(k)] = v
	}
	s.denseN, s.young = len(s.young), nil
}
