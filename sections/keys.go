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

func (s *section) get(key uint64) uint64 {
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
	limit := a.opts.MaxKeysPerSection
	if limit > 0 && len(s.young) >= (limit+1)/2 {
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
