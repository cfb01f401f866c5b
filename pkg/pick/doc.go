// Package pick ranks a tool catalog against a request, so that a model is shown only
// the few tools that matter: pickTools as a pure library. It never runs a tool.
//
// # Picking
//
//	cat, err := pick.NewCatalog(defs)          // index once
//	res, err := pick.Pick(ctx, "what's the weather in Paris?", cat, pick.Options{})
//	for _, r := range res {
//		fmt.Println(r.Name, r.Score, r.Reason) // get_weather 0.62 matched "weather" in name, description
//	}
//
// [Options] carry the defaults of pickTools: at most 3 candidates, a minimum score of
// 0.05, unsafe tools (Safe false) excluded unless AllowUnsafe; filters on tags, the
// caller's role (against Definition.Roles) and required capabilities; a Timeout after
// which the pick falls back to registration order and says so; Debug for provenance.
// Input may be a string or any JSON value. Empty input is an error ([ErrEmptyInput]);
// an empty catalog or no tool above the threshold is an empty result.
//
// # The index
//
// A [Catalog] holds the definitions and an inverted index over six fields: the name
// (split at `_`, `-`, `.` and camelCase, HTMLParser → html parser), the description, the
// tags, parameter names and parameter text (descriptions, titles, enum values, walked
// through the whole JSON Schema), and the response schema's names and descriptions.
// Words are case-folded, English stop words dropped, and the rest stemmed (Snowball).
//
// Each change (Put, Remove, Apply) publishes a new immutable [Snapshot]; a pick loads the
// current one atomically and never waits for indexing. Changes are incremental: posting
// lists are append-only and shared between snapshots, removed tools are masked by a
// bitmap until they are a quarter of the catalog and the index is compacted. A posting
// carries the tool's field lengths quantised to a byte, so the length norms come from a
// small per-snapshot table and a posting list is read sequentially.
//
// A pick reads only the posting lists of the query's terms, rarest first, into a pooled
// dense score array, and keeps the best k in a small heap. Once the terms left cannot
// lift an unmatched tool into the top k, the long lists of common words only update the
// tools still in the running; the ranking is exactly that of scoring everything.
//
// # Scoring
//
// The default [Scorer] is [BM25] in its BM25F form: per-field term frequencies are
// weighted, length-normalised per field and saturated once. Scores are normalised by
// the query's upper bound (the sum of its known terms' idf), so a score is the share of
// the request the tool matches, in 0..1, and does not depend on how well other tools
// did. [DefaultBM25Params] were tuned on two public tool-retrieval benchmarks (ToolLens,
// Seal-Tools, see internal/toolret), where they beat plain BM25 over the full tool text.
//
// [Embedding] scores by cosine similarity of embeddings from any OpenAI-compatible
// /v1/embeddings endpoint, with tool vectors cached by definition hash in memory and in a
// JetStream KV bucket shared by replicas. [Hybrid] fuses BM25 and embeddings by
// reciprocal rank fusion or a weighted sum.
package pick
