// Package pickercli is the toolfleet picker program, so that cmd/picker stays a thin main
// and its rules are tested: [Parse] reads the flags, each with a TOOLFLEET_* environment
// variable as its default, and [Run] serves picks until its context ends.
//
//	cfg, err := pickercli.Parse(os.Args[1:], os.Stderr)
//	...
//	err = pickercli.Run(ctx, cfg)   // ops server, NATS, the toolfleet-picker service
//
// # Settings
//
//	-nats-url, -nats-creds, -nats-user, -nats-tls-*   how to reach NATS (TOOLFLEET_NATS_*; password only from TOOLFLEET_NATS_PASSWORD)
//	-embeddings-url   OpenAI-compatible server for the embedding and hybrid scorers (TOOLFLEET_EMBEDDINGS_URL; key from TOOLFLEET_EMBEDDINGS_API_KEY)
//	-embeddings-model embedding model (TOOLFLEET_EMBEDDINGS_MODEL, text-embedding-3-small)
//	-stream-replicas  replicas of the embeddings bucket it creates (TOOLFLEET_STREAM_REPLICAS, 1)
//	-timeout          scoring bound for requests without their own (TOOLFLEET_PICKER_TIMEOUT, 2s)
//	-ops-addr         where /metrics, /healthz and /readyz listen; "off" disables
//	                  (TOOLFLEET_OPS_ADDR, ":9090"); the older -http and TOOLFLEET_PICKER_HTTP
//	                  still work, with a warning
//	-log-level        debug, info, warn or error (TOOLFLEET_LOG_LEVEL, info)
//	-learn            learn from the usage stream (default true; -learn=false ranks cold)
//	-share-usage      let every tenant's usage shape every tenant's picks (default false)
//
// /readyz answers 200 once the catalog is indexed, the usage stream replayed (when
// learning) and NATS is connected; before that, while the picker waits for the
// executors to create the catalog bucket, 503.
//
// `picker eval` ([Eval]) prints the default scorer's quality on the toolret retrieval
// benchmarks beside their plain-BM25 baseline; -usage DIR and -usage-cv evaluate
// learning from usage. [NewService] is the piece Run builds the
// service with; the all-in-one fleet uses it too.
package pickercli
