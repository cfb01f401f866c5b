// Package toolret reads the tool-retrieval benchmarks of ../shared/testdata/toolret
// (ToolLens and Seal-Tools) into tool definitions and queries, and scores a ranking of
// them with the benchmark's metrics: Recall@k, nDCG@k and COMP@k, computed exactly as the
// data's README defines them (binary relevance, |R| as the recall denominator, IDCG over
// min(k, |R|) ranks, each query weighing the same).
//
// # Turning benchmark tools into definitions
//
// ToolLens API names are not valid tool names and not unique, so a tool is named from
// its provider (tool_name), its API name and its id, e.g. Worldwide_Recipes_Suggestions_0.
// Its category becomes a tag, its parameter list a JSON Schema, its return shape a
// response schema. Seal-Tools names are kept (the two invalid ones have their spaces and
// dots replaced by `_`); the {name: {type, description}} parameters become a JSON Schema,
// responses a response schema, and the field ("Area/Subarea") tags.
//
// # Evaluating
//
//	b, err := toolret.Load(dir, "sealtools")
//	cat, err := pick.NewCatalog(b.Tools)
//	m, err := b.Evaluate(ctx, func(q string) ([]string, error) { ... ranked tool names ... })
//
// [Reference] holds the README's plain-BM25 figures, and [PlainBM25] recomputes them, which
// checks that the metrics here are the README's.
package toolret
