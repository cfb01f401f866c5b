package pick

// ExhaustiveBM25 scores every posting, without early termination: the reference the
// tests compare the default BM25 with.
var ExhaustiveBM25 Scorer = BM25{path: pathBlocks}
