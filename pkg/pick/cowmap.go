package pick

// cowMap is a map that is never written after it is published, so readers
// need no lock. A change makes a new cowMap that shares the large base map and copies
// only a small delta of recent changes; when the delta grows past an eighth of the base,
// the two are merged into a new base. Writers thus pay amortised O(1) per change instead
// of copying the whole map, and readers pay at most two lookups.
type cowMap[K comparable, V any] struct {
	base  map[K]V
	delta map[K]entry[V]
}

type entry[V any] struct {
	v       V
	deleted bool
}

func (m cowMap[K, V]) get(k K) (V, bool) {
	if e, ok := m.delta[k]; ok {
		return e.v, !e.deleted
	}
	v, ok := m.base[k]
	return v, ok
}

// getBytes is get for a string key held in a byte slice, without allocating the string.
func getBytes[V any](m cowMap[string, V], k []byte) (V, bool) {
	if e, ok := m.delta[string(k)]; ok {
		return e.v, !e.deleted
	}
	v, ok := m.base[string(k)]
	return v, ok
}

// with returns a new map holding m's entries changed by changes (deleted entries are
// removed). m itself is not modified.
func (m cowMap[K, V]) with(changes map[K]entry[V]) cowMap[K, V] {
	if len(changes) == 0 {
		return m
	}
	if len(m.delta)+len(changes) > len(m.base)/8+64 {
		base := make(map[K]V, len(m.base)+len(m.delta)+len(changes))
		for k, v := range m.base {
			base[k] = v
		}
		for _, d := range []map[K]entry[V]{m.delta, changes} {
			for k, e := range d {
				if e.deleted {
					delete(base, k)
				} else {
					base[k] = e.v
				}
			}
		}
		return cowMap[K, V]{base: base}
	}
	delta := make(map[K]entry[V], len(m.delta)+len(changes))
	for k, e := range m.delta {
		delta[k] = e
	}
	for k, e := range changes {
		delta[k] = e
	}
	return cowMap[K, V]{base: m.base, delta: delta}
}
