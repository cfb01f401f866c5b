// Command planner serves toolfleet's planner: the tool loop over the fleet and its HTTP
// API. Configuration comes from flags and TOOLFLEET_* environment variables; run with
// -h for the list.
//
// `planner health` asks a running planner's ops server for /readyz (exit 0 when ready).
package main

import (
	"os"

	"github.com/toolfleet/toolfleet/cmd/planner/plannercli"
	"github.com/toolfleet/toolfleet/internal/ops"
)

func main() {
	os.Exit(ops.Main("planner", os.Args[1:], plannercli.Parse, plannercli.Run))
}
