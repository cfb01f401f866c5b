// Package picker runs pickTools as a NATS micro service over the live tool catalog.
//
// # The service
//
// The service is named toolfleet-picker (so `nats micro ls`, `info` and `stats` show
// it) and has one endpoint, pick, on the subject [PickSubject], in a queue group so that
// replicas share the load. A request is JSON:
//
//	{"input": "what's the weather in Paris?",
//	 "options": {"maxCandidates": 3, "minScore": 0.05, "debug": true, "scorer": "bm25"}}
//
// input is a string or any JSON value; options are [pick.Options] in their JSON form plus
// "scorer" (bm25, the default; embedding and hybrid when an embeddings endpoint is
// configured). The reply is
//
//	{"results": [{"name": "get_weather", "score": 0.62, "reason": "...", "provenance": {...}}],
//	 "catalogVersion": 12, "fallback": false}
//
// Failures are micro errors (Nats-Service-Error-Code and Nats-Service-Error headers):
// 400 for malformed JSON, unknown or out-of-range options, an unknown scorer or empty
// input; 503 until the catalog has been loaded; 500 when the scorer fails.
//
// # The catalog
//
// The service watches the JetStream KV bucket [CatalogBucket] (key: tool name, value:
// the tools.Definition JSON) and applies every put and delete to a [pick.Catalog]. The
// initial contents are applied as one batch; later changes are applied in batches as
// they arrive. Each batch publishes a new index snapshot, swapped in atomically: a pick
// always uses the last complete index and never waits for re-indexing. Executors put
// their definitions again every few seconds to keep them alive; a value seen before is
// not decoded again. A value that is not a valid definition is logged and withdraws the
// key's tool; it never stops the watch. The picker never creates the bucket (that is the
// executors' part, jsutil.Ensure): it waits for it, and [Service.Ready] holds once
// the catalog has been loaded.
//
// # Learning from usage
//
// With [WithLearning] the service replays the usage stream (events.StreamUsage, which
// planners write: a record per call that returned ok) into a pick.Learned before it is
// ready, then follows it; every replica learns every record (an ordered consumer each).
// A request that names no scorer, or "usage", ranks with what its tenant's runs used:
// options.tenant names the tenant (the planner sends its run's). "bm25" still ranks
// cold. A record that does not decode is logged, counted
// (toolfleet_picker_usage_records_total{outcome="dropped"}) and skipped. From the end of
// the replay until the service stops, the learned index's Run rebuilds stale indexes and
// chooses each tenant's settings from its own usage (pick.Learned.Run); the
// toolfleet_picker_tuning_* gauges show them per tenant, with the held-out nDCG@10 they
// were chosen on.
//
// # Running
//
// [New] builds a service on a connection and [Service.Run] serves until the context
// ends; [Service.Ready] says whether the catalog is indexed and NATS connected, and
// [Service.Registry] holds its metrics. The picker program (flags, the ops server with
// /metrics and /readyz) is cmd/picker/pickercli.
package pickerservice
