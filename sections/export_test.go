package sections

// KeysInSections counts, under their locks, the keys held in the sections of
// the current epoch: the number KeysHeld must report once calls have stopped.
func (a *Allocator) KeysInSections() int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var n int64
	for _, sp := range a.spaces {
		for _, sec := range sp.sections {
			sec.mu.Lock()
			n += int64(sec.held())
			sec.mu.Unlock()
		}
	}
	return n
}
