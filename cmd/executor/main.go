// Command executor serves toolfleet tool calls: the built-in tools and the tools of a
// tools file, from their durable consumers on JetStream. Configuration comes from flags
// and TOOLFLEET_* environment variables; run with -h for the list. SIGTERM or SIGINT
// stops it gracefully: no new calls, in-flight calls finish or are handed back.
//
// `executor health` asks a running executor's ops server for /readyz (exit 0 when ready).
package main

import (
	"os"

	"github.com/toolfleet/toolfleet/cmd/executor/executorcli"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

func main() {
	// First: in a sandbox launcher (a command tool started in its Landlock sandbox)
	// this confines the process and execs the tool, and never returns.
	sandbox.Init()
	os.Exit(ops.Main("executor", os.Args[1:], executorcli.Parse, executorcli.Run))
}
