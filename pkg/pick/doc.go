// Package pick ranks a tool catalog against a request, so that a model is shown only
// the few tools that matter (pickTools). It is a pure library: it never runs a tool,
// and needs no server unless an [Embedding] scorer shares its vectors through
// JetStream.
//
// # Picking
//
// Index the definitions once in a [Catalog], then pick for each request:
//
//	cat, err := pick.NewCatalog(defs) // []tools.Definition, in registration order
//	if err != nil {
//		return err // a definition with an invalid name
//	}
//	res, err := pick.Pick(ctx, "what's the weather in Paris?", cat, pick.Options{})
//	for _, r := range res {
//		fmt.Println(r.Name, r.Score, r.Reason) // get_weather 0.62 matched "weather" in name, description
//	}
//
// [Options] carry the defaults of pickTools: at most 3 candidates, a minimum score of
// 0.05, and unsafe tools (Safe false) excluded unless AllowUnsafe. Filters narrow the
// candidates: a run's own tool names, tags to include or exclude, the caller's role
// (against Definition.Roles) and the capabilities the caller needs. A Timeout bounds
// scoring, after which the pick falls back to registration order and says so. Input may
// be a string or any JSON value. Empty input is an error ([ErrEmptyInput]); an empty
// catalog or no tool above the threshold is an empty result.
//
// # Provenance
//
// Every [Result] carries a short Reason and a [Provenance]: the scorer, the catalog
// version ranked, and whether the input was cut or the pick fell back. With
// Options.Debug the provenance also holds the scorer's details ([BM25Details]: each
// matched query term, its idf and its contribution per field).
//
// # Scorers
//
// A [Scorer] ranks the candidates of a [Request]. Three come with the package:
//
//   - [BM25], the default: BM25F over the catalog's inverted index, words and phrases.
//     Scores are the share of the request's information a tool matches, in 0..1,
//     independent of how well the other tools did. See "Cold quality" below.
//   - [Embedding]: cosine similarity of embeddings from an [Embedder], such as any
//     OpenAI-compatible /v1/embeddings endpoint ([OpenAIEmbedder]); tool vectors are
//     cached by definition in memory and, through a [VectorStore] such as
//     [KVVectorStore], in a JetStream KV bucket shared by replicas.
//   - [Hybrid]: BM25 and embeddings fused by reciprocal rank fusion or a weighted sum.
//
// A scorer of your own is a type with Name and Score methods.
// Score walks [Request.Candidates] (only the tools that passed the filters), reads each
// tool with [Snapshot.Definition], and returns at most Request.Limit [Hit] values, best
// first, each with a score in 0..1. Pick then drops hits below MinScore and adds the
// provenance; see the example of [Scorer].
//
// # Cold quality
//
// Before any usage is known, quality comes from the tool texts alone (no embedding
// model is assumed). The choices, each kept because it held up on queries the tuning
// never saw (k-fold cross-validation on the public ToolLens and Seal-Tools queries,
// `picker eval -folds 5`):
//
//   - Fields scored together (BM25F) with one saturation, so that a word found in the
//     name and the description is not counted twice over; every field weighs the same.
//   - Identifiers split (snake_case, kebab-case, camelCase, HTMLParser), words stemmed
//     (Snowball English) and stop words dropped, the same for tools and requests.
//     Contractions and possessives lose their ending (I'm, user's): ToolLens requests
//     start with "I'm", and its "m" matched H&M's tools (+0.55 nDCG@10 on ToolLens).
//   - Phrases: each pair of adjacent words in a tool's name and description is indexed
//     as a term of its own, and each pair of adjacent words in the request looks one up.
//     A phrase is rarer than either word, so its idf is high, and it tells "dance
//     photography" from "dance" and "photography" apart. Requests often say what a tool
//     does in the words of its name (getDancePhotography); this alone lifts Seal-Tools
//     nDCG@10 from about 86 to 93 on held-out queries.
//   - Sentences: a request of several sentences is also scored one sentence at a time,
//     and a tool's share of the sentence it matches best adds 0.3 of it (the score is
//     (share + 0.3·best)/1.3). A request that asks for several things, a sentence each,
//     needs a tool for each, and the tool for one sentence matches only a small share of
//     the whole: Seal-Tools held-out nDCG@10 93.16 → 94.55. It costs a second read of the
//     postings of a multi-sentence request's words (within the same budget).
//   - Three free parameters only, K1, the phrase weight and the sentence weight
//     ([DefaultBM25Params]); the length normalisation is the textbook 0.75, off for the
//     parameter lists.
//
// Tried and left out, each measured on all the public queries before sentences and
// contractions (nDCG@10, ToolLens / Seal-Tools, against 36.44 / 93.16): per-field weights (halving or doubling one field's
// weight, or its B, moved ToolLens by −1.6 to +0.6 and Seal-Tools by −5.1 to +0.03;
// tuned freely they gained on the tuning queries and lost it on unseen ones);
// pseudo-relevance feedback, RM3-style, the best words of the top 3 or 5 tools fused
// at 0.2 to 0.5 (−0.7 to −5.4 on ToolLens, −3.7 to −38.9 on Seal-Tools: the top tools of
// a request are different tools, and their words drift it; it also doubles the work of
// a pick); WordNet (Debian's wordnet-base): synonyms of the first sense, derivations
// (financial → finance) and hypernyms of unknown and known query words, fused at 0.1
// to 0.35 (+0.1 at best on ToolLens, −0.0 to −1.3 on Seal-Tools: the words a ToolLens
// request lacks are the tools' purposes, not synonyms of its own words); and prefix
// conflation of words the catalog does not know (±0.1). What the fleet learns from usage
// is added on top; see "Learning from usage".
//
// # Learning from usage
//
// A [Learned] folds usage records ([Usage]: a request, the tool a successful call of it
// used, the run, the tenant) into, per tenant, a learned field per tool (the requests
// that led to it: document expansion from real usage) and co-usage partners (the tools
// used in the same runs). [Learned.Scorer] ranks with them for one tenant:
//
//	l, _ := pick.NewLearned(pick.LearnConfig{})
//	_ = l.Learn(pick.Usage{Tenant: "acme", Run: "run-1", Tool: "getForecast", Request: "will it rain tomorrow?"})
//	res, _ := pick.Pick(ctx, "rain on saturday?", cat, pick.Options{Scorer: l.Scorer("acme")})
//
// The score is (cold + Weight·learned^Power)/(1 + Weight), where cold is the BM25F
// score above and learned the BM25 share (k1 1.2, b 0.75) of the request's information
// found in the tool's learned field; the four tools used most often with the best one
// then gain CoUsage × (share of its runs they were used in) × its score. Weight,
// CoUsage and Power are each tenant's own, chosen from its own usage (see
// "Self-tuning"): how much usage deserves differs by catalog, ToolLens wanting eight
// times the weight Seal-Tools wants. Squaring (Power 2) keeps a loose match of a few
// common words from moving the ranking: linear, it cost Seal-Tools (whose requests
// rarely resemble each other) 14 points of held-out nDCG@10.
//
// # Self-tuning
//
// [Learned.Run] chooses each tenant's [Tuning] from that tenant's own log, in the
// background: the log keeps its most recent runs (TuneLog, 2,048: each a request and
// the tools that served it); the most recent fifth is held out, the rest learned into
// an index of its own, and each setting of the grid ([DefaultTuneGrid]: Weight 0.5 to
// 16, CoUsage off to 1.5, Power 2 or 1; 72 settings) ranks the catalog for every
// held-out request. The best mean nDCG@10 against the tools each run really used wins,
// if it beats the defaults by more than twice the standard error of the difference
// (the best of many settings beats them by about that much by chance); else the tenant
// keeps the defaults, as it does while it holds out fewer than MinHeldOut (50) runs.
// Holding out the most recent runs measures what counts: requests that come after the
// ones learned. Picks then rank with the chosen setting over the index of all the
// records. A tenant is tuned again at most every TuneEvery (10 minutes), once a tenth
// of its log is new; one tuning at a time, each 73 × held-out picks (about a second of
// one core for 197 held-out runs over 4,076 tools, or 277 over 464). [Learned.Tunings] says what every
// tenant ranks with and the held-out scores it was chosen on; [Learned.Tune] tunes
// now (evaluations, tests).
//
// The defaults, Weight 1, CoUsage 0.1 and Power 2, are safe on both benchmarks: they
// lift ToolLens from 37 to 63 held-out nDCG@10 and leave Seal-Tools at its cold figure.
// On the public queries (`picker eval -usage-cv`: usage from four folds, figures on the
// fifth) ToolLens chooses Weight 8 and CoUsage 1 (0.6 on one fold), 77.4 held-out
// nDCG@10 against 62.5 for the defaults; Seal-Tools keeps the defaults on every fold
// (94.8, cold 94.6).
//
// The ranking is exact: each learned match's part is added to its accumulator before the
// cold pass, which then ranks every tool by the fused score. As for the cold score, the
// learned fields' postings are read rarest term first, at most one per 8 learned tools
// (at least 1,024), and at most 64 distinct query terms are looked up in them. A
// request's words are split, looked up and stemmed once, for the learned fields and the
// tools' own text alike; each learned term's idf is computed once per catalog snapshot.
//
// The rules of what is kept:
//   - Bounds: per tool at most MaxRequests (32) distinct requests of at most MaxTerms
//     (24) distinct terms, kept as 4-byte hashes of the analysed terms (no dictionary
//     grows with usage), and MaxPartners (16) partners; MaxRuns (4096) recent runs per
//     tenant are remembered to pair their tools. One million records over 6,000 tools
//     take about 60 MiB, as much as half of them did.
//   - Decay: a repeated request adds a use. A full tool makes room for a new request by
//     dropping the one of least decayed use, uses·2^(−age/HalfLife) (HalfLife 14 days),
//     unless that is above 1 (a fresh single use): often used and recent requests stay.
//     Partners are counted with Metwally's space-saving count.
//   - Definition changes: a record carries [LearnKey] of the definition its call ran
//     with (hash of description, parameters and response schema). What was learned for
//     a tool counts only while the catalog's definition has the same key: a change of
//     tags, roles, safety or version keeps it, a new description or schema drops it, and
//     the first record for the new definition starts the tool afresh.
//   - Tenants: each tenant's records shape only its picks, unless LearnConfig.Share; the
//     provenance ([LearnedDetails]) names the caller's own query terms that matched and
//     counts, never the text of a learned request.
//   - Freshness: a tenant's pick index is rebuilt from its records at most every
//     RefreshEvery (1s), by [Learned.Run] when a pick finds it stale; picks meanwhile
//     read the previous one, without waiting for the rebuild or for Learn. Without Run,
//     the pick that finds it stale rebuilds it itself.
//   - Self-tuning: the log of each tenant's most recent runs, at most TuneLog (2,048)
//     runs of a request (at most 1 KiB; the planner sends its first 200 characters) and
//     up to 16 tool names: about 0.7 MiB per tenant for 200-character requests, 2.5 MiB
//     at most. A tuning holds a copy of one tenant's log and an index of it while it runs.
//
// # The index
//
// A [Catalog] indexes six fields of each definition ([Field]): the name (split at `_`,
// `-`, `.` and camelCase, HTMLParser → html parser), the description, the tags,
// parameter names and parameter text (descriptions, titles, enum values, walked through
// the whole JSON Schema), and the response schema's names and descriptions. Words are
// case-folded, English stop words dropped, and the rest stemmed (Snowball); the name and
// the description also index their adjacent word pairs as phrases.
//
// Each change (Put, Remove, Apply) publishes a new immutable [Snapshot]; a pick loads the
// current one atomically and never waits for indexing. Changes are incremental: posting
// lists are append-only and shared between snapshots, removed tools are masked by a
// bitmap until they are a quarter of the catalog and the index is compacted. A posting
// carries the tool's field lengths quantised to a byte, so the length norms come from a
// small per-snapshot table.
//
// Beside each posting list the snapshot keeps its impacts for the catalog's parameters:
// each posting's saturated, length-normalised term frequency tf~/(K1+tf~), 8 bytes a
// posting, and the highest of them per term. They are appended like the postings; the
// field-length averages the norms use are refreshed, and every impact recomputed, only
// when a live average drifts more than 2% from them. A scorer with other parameters
// computes its impacts once per snapshot, on first use. Query words are looked up by
// their spelling in the tools (one lookup; others are stemmed first) and phrases by the
// two words' term ids.
//
// A BM25 pick reads only the posting lists of the query's terms, rarest first, into a
// pooled dense score array, and keeps the best k in a small heap: a multiply-add per
// posting. It reads at most as many postings as the catalog has tools, however much
// text the tools have: the commonest words of a long request past that budget are not
// scored (they add little to a ranking and most of its cost). A request that reads
// postings of many tools is scored a block of 16,384 tool ids at a time, so that the
// scores stay in the cache; the others term by term: once the terms left cannot lift
// an unmatched tool into the top k, the long lists of common words only update the tools
// still in the running. Either way the ranking is exactly that of scoring every posting
// read. Only the k tools returned are explained (Reason, Debug details), from their own
// term lists.
package pick
