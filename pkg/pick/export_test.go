package pick

// ExhaustiveBM25 scores every posting, without early termination: the reference the
// tests compare the default BM25 with.
var ExhaustiveBM25 Scorer = BM25{path: pathBlocks}

// LearnedWithPath is l's scorer for tenant with its cold BM25 forced to score block by
// block (blocks) or term by term with early termination: both must rank alike.
func LearnedWithPath(l *Learned, tenant string, blocks bool) Scorer {
	p := pathSparse
	if blocks {
		p = pathBlocks
	}
	return &learnedScorer{l: l, tenant: tenant, cold: BM25{path: p}}
}
