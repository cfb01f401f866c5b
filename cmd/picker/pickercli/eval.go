package pickercli

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
)

// Eval is `picker eval [-data dir]`: it prints the default scorer's quality on the
// toolret retrieval benchmarks beside their plain-BM25 baseline to out.
func Eval(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	dir := fs.String("data", shareddata.Dir("toolret"), "the toolret directory (default ../shared/testdata/toolret)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("toolret data not found; pass -data or set TOOLFLEET_SHARED")
	}
	_, err := toolret.Report(ctx, out, *dir)
	return err
}
