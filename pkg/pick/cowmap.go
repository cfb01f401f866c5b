package pick

// cowMap is a string-keyed map that is never written after it is published, so readers
// need no lock. A change makes a new cowMap that shares the large base map and copies
// only a small delta of recent changes; when the delta grows past an eighth of the base,
// the two are merged into a new base. Writers thus pay amortised O(1) per change instead
// of copying the whole map, and readers pay at most two lookups.
type cowMap[V any] struct {
	base  map[string]V
	delta map[string]entry[V]
}

type entry[V any] struct {
	v       V
	deleted bool
}

func (m cowMap[V]) get(k string) (V, bool) {
	if e, ok := m.delta[k]; ok {
		return e.v, !e.deleted
	}
	v, ok := m.base[k]
	return v, ok
}

// getBytes is get for a key held in a byte slice, without allocating the string.
func (m cowMap[V]) getBytes(k []byte) (V, bool) {
	if e, ok := m.delta[string(k)]; ok {
		return e.v, !e.deleted
	}
	v, ok := m.base[string(k)]
	return v, ok
}

// with returns a new map holding m's entries changed by changes (deleted entries are
// removed). m itself is not modified.
func (m cowMap[V]) with(changes map[string]entry[V]) cowMap[V] {
	if len(changes) == 0 {
		return m
	}
	if len(m.delta)+len(changes) > len(m.base)/8+64 {
		base := make(map[string]V, len(m.base)+len(m.delta)+len(changes))
		for k, v := range m.base {
			base[k] = v
		}
		for _, d := range []map[string]entry[V]{m.delta, changes} {
			for k, e := range d {
				if e.deleted {
					delete(base, k)
				} else {
					base[k] = e.v
				}
			}
		}
		return cowMap[V]{base: base}
	}
	delta := make(map[string]entry[V], len(m.delta)+len(changes))
	for k, e := range m.delta {
		delta[k] = e
	}
	for k, e := range changes {
		delta[k] = e
	}
	return cowMap[V]{base: m.base, delta: delta}
}
