// Command picker runs the toolfleet picker: a NATS micro service (toolfleet-picker,
// endpoint pick) that ranks the live tool catalog against requests. Configuration comes
// from flags and TOOLFLEET_* environment variables; run with -h for the list.
//
// `picker eval [-data dir]` instead prints the default scorer's quality on the toolret
// retrieval benchmarks beside their plain-BM25 baseline; `picker health` asks a running
// picker's ops server for /readyz (exit 0 when ready).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/toolfleet/toolfleet/cmd/picker/pickercli"
	"github.com/toolfleet/toolfleet/internal/ops"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "eval" {
		err := pickercli.Eval(context.Background(), os.Args[2:], os.Stdout)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			os.Exit(ops.ExitOK)
		case errors.Is(err, ops.ErrConfig):
			fmt.Fprintln(os.Stderr, "picker eval:", err)
			os.Exit(ops.ExitConfig)
		default:
			fmt.Fprintln(os.Stderr, "picker eval:", err)
			os.Exit(ops.ExitFailure)
		}
	}
	os.Exit(ops.Main("toolfleet-picker", os.Args[1:], pickercli.Parse, pickercli.Run))
}
