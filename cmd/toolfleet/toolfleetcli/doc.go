// Package toolfleetcli runs the whole toolfleet fleet in one process: an embedded
// nats-server with JetStream (file storage), an executor serving the built-in tools, the
// picker service and the planner. It is the first run (`toolfleet demo`), the
// interactive playground (`toolfleet dev`), and a fixture for tests.
//
// # The fleet
//
// [Start] brings the parts up in the order they depend on each other — the server, the
// executor (which creates the streams and publishes its tools to the catalog), the picker,
// then the planner once the catalog lists the tools — and [Fleet.Stop] takes them down in
// reverse, the executor finishing or handing back the calls in flight. Parts connect
// in-process (nats.InProcessServer), so the demo needs no port of its own; the server
// still listens on loopback for outside clients such as the nats CLI.
//
//	f, err := toolfleetcli.Start(ctx, toolfleetcli.Options{})
//	if err != nil {
//		return err
//	}
//	defer f.Stop()
//	run, err := f.Planner.Start(ctx, planner.StartRequest{Input: "What is 6*7?", Tools: []string{"calculator"}})
//
// # The demo
//
// [Demo] runs a scripted agent conversation through the fleet (demo.yaml, embedded): a
// parallel step, an invalid call repaired after the validator's messages, an unsafe
// write_file that waits for an approval (the demo plays the approver and says so), a
// final answer. It prints the run's timeline, then publishes a few thousand tool calls as
// call events through internal/loadgen and prints calls/s, latency percentiles, retries,
// failures, and how many calls were lost or doubled — none, or the demo fails. With
// TOOLFLEET_MODEL set the run uses that model instead of the script; the scripted model is
// labelled as such wherever it is used.
//
// # dev
//
// [Dev] keeps the fleet running with the planner's HTTP API and one ops server for the
// whole fleet (/metrics with every part's metrics, /readyz once every part is ready)
// until its context ends, and prints how to start a run with curl. DevOptions.Host is
// where NATS, the API and the ops server listen: 127.0.0.1, or 0.0.0.0 in a container.
// Options carry what the separate programs would be given, so that dev can try every
// feature: the planner's price table and operator roles, the executor's tools file
// (loaded as cmd/executor loads it, its MCP servers included) and the default model.
//
// # The command
//
// [Main] is the toolfleet command (cmd/toolfleet), on cobra: the client commands that
// drive a fleet — run, runs (ls, get, watch, cancel, pause, resume, send), approvals (ls, approve,
// deny, modify), tools (ls, show) over the planner API with pkg/client/runs, call over
// NATS with pkg/client — and version, completion and help (docs/cli.md has them all,
// with their exit codes); and the all-in-one programs `toolfleet demo`, `toolfleet dev`,
// `toolfleet mcp` and `toolfleet health`, in the shape of every program (internal/ops:
// their settings, logs and exit codes), each listing only its own flags. Every command
// parses its flags with cobra, in one style: a long flag takes one dash or two (-model x,
// --model x, --model=x), as the docs and the other programs, on Go's flag package, spell
// them; each flag's TOOLFLEET_* variable is its default. [Parse] reads a program's
// command line as toolfleet does, and [Run] runs it.
// The fleet builds its parts with the programs' own pieces (executorcli.New,
// pickercli.NewService, plannercli.New), so that it runs what the separate programs run.
package toolfleetcli
