// Package plannercli is the toolfleet planner program, so that cmd/planner stays a thin
// main and its rules are tested: [Parse] reads the flags, each with a TOOLFLEET_*
// environment variable as its default, and [Run] serves until its context ends.
//
//	cfg, err := plannercli.Parse(os.Args[1:], os.Stderr)
//	...
//	err = plannercli.Run(ctx, cfg)   // ops server, NATS, the planner and its HTTP API
//
// # Settings
//
//	-nats-url, -nats-creds, -nats-user, -nats-tls-*   how to reach NATS (see internal/natsconn; TOOLFLEET_NATS_*)
//	-http-addr        the HTTP API's listen address (TOOLFLEET_HTTP_ADDR, ":8080")
//	-script           a scripted model, name=path (repeatable); a real one comes from TOOLFLEET_MODEL
//	-stream-replicas  replicas of the streams and buckets it creates (TOOLFLEET_STREAM_REPLICAS, 1)
//	-shards           streams calls and results are each split over (TOOLFLEET_SHARDS, 1; see events.Config.Shards)
//	-picker           ask the toolfleet-picker service for candidates on large tool sets (true)
//	-step-lease       how long a step held by a replica that died waits for another to take it (TOOLFLEET_STEP_LEASE, 3s; see planner.Config.StepLease)
//	-ops-addr         where /metrics, /healthz and /readyz listen; "off" disables (TOOLFLEET_OPS_ADDR, ":9090")
//	-log-level        debug, info, warn or error (TOOLFLEET_LOG_LEVEL, info)
//
// TOOLFLEET_API_TOKEN, when set, protects the API with a bearer token; it is never a
// flag, since flags show in process lists.
//
// # Two servers
//
// The API keeps its own /healthz and /readyz beside /v1/..., for probes aimed at the API
// port. The ops server is the one every part has: /metrics (the Go runtime and process
// collectors) and /readyz, which answers 200 once the planner's streams and consumers
// exist and NATS is connected.
//
// [New] and [ServeAPI] are the pieces Run is made of; the all-in-one fleet uses them too.
package plannercli
