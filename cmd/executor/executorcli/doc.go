// Package executorcli is the toolfleet executor program, so that cmd/executor stays a
// thin main and its rules are tested: [Parse] reads the flags, each with a TOOLFLEET_*
// environment variable as its default, and [Run] serves until its context ends.
//
//	cfg, err := executorcli.Parse(os.Args[1:], os.Stderr)
//	...
//	err = executorcli.Run(ctx, cfg)   // ops server, NATS, the executor; nil after a graceful stop
//
// [New] and [Serving] are the pieces Run is made of; the all-in-one fleet
// builds its executor with them too.
//
// # Settings
//
//	-nats-url, -nats-creds, -nats-user, -nats-tls-cert, -nats-tls-key, -nats-tls-ca
//	                   how to reach NATS (see internal/natsconn; TOOLFLEET_NATS_*)
//	-concurrency       calls of one tool run at once by this replica (TOOLFLEET_CONCURRENCY,
//	                   16 per core and at least 256: executor.DefaultConcurrency)
//	-builtins          built-in tools to serve, comma-separated; "all" (default) serves
//	                   every configured one, "none" none (TOOLFLEET_BUILTINS)
//	-sandbox-root      directory of read_file, list_dir, write_file (TOOLFLEET_SANDBOX_ROOT)
//	-http-allowlist    hosts http_get may reach, comma-separated (TOOLFLEET_HTTP_ALLOWLIST)
//	-tools-file        YAML or JSON tools file (TOOLFLEET_TOOLS_FILE): command and HTTP
//	                   tools, and MCP servers whose tools it serves (see pkg/toolsfile);
//	                   the servers are connected before the executor starts, and it
//	                   does not start when one cannot be reached or one of its tools
//	                   is refused; when their tools change, a new executor takes over
//	                   in the same process (see Run)
//	-ops-addr          where /metrics, /healthz and /readyz listen; "off" disables
//	                   (TOOLFLEET_OPS_ADDR, ":9090"; see internal/ops). The older
//	                   -metrics-addr and TOOLFLEET_METRICS_ADDR still work, with a warning.
//	-log-level         debug, info, warn or error (TOOLFLEET_LOG_LEVEL, info)
//	-grace-period      how long in-flight calls may finish on SIGTERM (TOOLFLEET_GRACE_PERIOD, 30s)
//	-executor-id       this replica's name in results and logs (TOOLFLEET_EXECUTOR_ID, the host name)
//	-stream-replicas   replicas of the streams it creates: 1, or 3 in a cluster (TOOLFLEET_STREAM_REPLICAS, 1)
//	-shards            streams calls and results are each split over (TOOLFLEET_SHARDS, 1; see events.Config.Shards)
//	-operator-roles    roles that may answer the approvals of, and cancel, other roles' calls
//	                   of their tenant (TOOLFLEET_OPERATOR_ROLES, none; see
//	                   executor.WithOperatorRoles): the planner's, the same on every part
//
// A flag wins over its variable; a malformed variable is an error naming it, never
// silently replaced by the default.
//
// TOOLFLEET_SANDBOX_LAUNCHER, which has no flag (pkg/sandbox reads it, in every program
// that runs command tools), names the sandbox launcher program (cmd/toolfleet-sandbox);
// unset, the one beside the running binary is used, else the executor re-executes
// itself. At start, an executor with sandboxed tools logs which (sandbox.Launcher), and
// warns where the launcher program named or installed cannot be used.
//
// # Readiness
//
// /readyz answers 200 once NATS is connected and every served tool's call consumer is
// being consumed, 503 before.
package executorcli
