package pick

// topK keeps the k best (score, id) pairs seen, in a min-heap whose root is the worst
// kept pair, so that a candidate is compared with one value and most are rejected there.
// Ties go to the lower rank key (registration order).
type topK struct {
	k    int
	heap []ranked
}

type ranked struct {
	score float64
	key   uint64 // tie-breaker: lower is better
	id    DocID
}

// worse reports whether a ranks below b.
func worse(a, b ranked) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.key > b.key
}

func (t *topK) reset(k int) {
	t.k = k
	t.heap = t.heap[:0]
}

// wouldKeep reports whether a candidate with this score could enter, ignoring ties; it
// lets callers skip costly checks for hopeless candidates.
func (t *topK) wouldKeep(score float64) bool {
	return len(t.heap) < t.k || score >= t.heap[0].score
}

func (t *topK) push(r ranked) {
	if t.k <= 0 {
		return
	}
	if len(t.heap) < t.k {
		t.heap = append(t.heap, r)
		t.up(len(t.heap) - 1)
		return
	}
	if !worse(t.heap[0], r) {
		return
	}
	t.heap[0] = r
	t.down(0)
}

func (t *topK) up(i int) {
	h := t.heap
	for i > 0 {
		p := (i - 1) / 2
		if !worse(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (t *topK) down(i int) {
	h := t.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && worse(h[r], h[l]) {
			m = r
		}
		if !worse(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// sorted empties the heap into dst, best first.
func (t *topK) sorted(dst []ranked) []ranked {
	n := len(t.heap)
	start := len(dst)
	for range n {
		dst = append(dst, ranked{})
	}
	for i := n - 1; i >= 0; i-- {
		dst[start+i] = t.heap[0]
		last := len(t.heap) - 1
		t.heap[0] = t.heap[last]
		t.heap = t.heap[:last]
		t.down(0)
	}
	return dst
}
