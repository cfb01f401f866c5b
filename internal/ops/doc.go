// Package ops is how every toolfleet program is operated, in one shape: the settings
// each reads the same way, its logs, its ops HTTP server and its health subcommand.
//
// # Settings
//
//	-ops-addr    where the ops server listens; "off" disables it (TOOLFLEET_OPS_ADDR, ":9090")
//	-log-level   debug, info, warn or error (TOOLFLEET_LOG_LEVEL, info)
//
// [Register] adds both to a program's flag set and [Flags.Config] reads them after
// parsing: a flag wins over its variable, and a malformed value is an error that names
// the setting it came from. Older names of the ops address ([ExecutorAlias],
// [PickerAlias]) are still read, below the new ones, and the program warns once that
// they are deprecated. The flags know whether they were given, so all this holds too
// when pflag parses the flag set (AddGoFlagSet: toolfleet's cobra commands).
//
// # Logs
//
// [NewLogger] writes zerolog JSON lines with the service name and a UTC timestamp in
// milliseconds ([TimeFormat]); [Config.Logger] is that logger at the configured level.
//
// # The ops server
//
//	GET /metrics   the program's own Prometheus registry
//	GET /healthz   200 while the process serves HTTP: liveness
//	GET /readyz    200 once every readiness check passes, else 503 with the reasons
//
// [Start] binds the address at once, so a taken port fails the start, and serves in the
// background; /readyz answers 503 "starting" until the program hands its checks to
// [Server.SetReady] (typically [Connected] and the part's own: consumers started,
// catalog indexed).
//
//	srv, err := ops.Start(cfg.Ops.Addr, reg, log)
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
//	// ... connect, start the part ...
//	srv.SetReady(ops.Connected(nc), partReady)
//
// # health
//
// `<program> health` ([Health]) asks the ops server of a program running beside it —
// the same TOOLFLEET_OPS_ADDR, on loopback — for /readyz, and exits 0 when it answers
// 200, else 1 with the reason on stderr. It needs no shell, so it is a container's
// HEALTHCHECK for any part of the shared image. [Main] runs a program with this
// subcommand, signals and exit codes; a command line that another parser reads
// (toolfleet's, on cobra) takes [RegisterHealth] and [Flags.Health] for it, and [Serve]
// for the program.
//
// # help, version, exit codes
//
// [Main] gives every program `help` (like -h and --help: the usage, exit 0) and
// `version` ([Build]: the module version, VCS revision and time from
// runtime/debug.ReadBuildInfo, the Go version). It exits 0 after a clean stop, 1 when the
// program fails while running, 2 for a configuration error: parse's, and run's that
// match [ErrConfig] ([ConfigError] marks them: a model's missing key, a tools file's
// missing secret, found only when the part starts).
package ops
