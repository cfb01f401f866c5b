package pickercli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Eval is `picker eval [-data dir] [-folds k] [-usage dir | -usage-cv]`: it prints the
// default scorer's quality on the toolret retrieval benchmarks beside plain BM25 to out.
// With -folds k (5 unless set), it cross-validates: the scorer is tuned (internal/toolret's
// Grid) on k−1 folds of the queries and scored on the fold left out, so that the figures
// are on queries the tuning never saw. -folds 0 instead scores the shipped defaults on
// all the queries, the ones they were tuned on.
//
// With -usage dir it evaluates learning from usage instead: for each benchmark with a
// dir/<benchmark>/queries.jsonl (lines in the queries.jsonl format: a request and the
// tools that ran for it), it learns from those lines and scores -data's queries cold and
// with what was learned. Lines whose text is that of a scored query are skipped, so the
// eval never learns from what it scores. -usage-cv cross-validates learning on -data's
// own queries: usage from k−1 folds, figures on the fold left out, beside plain BM25.
// Either way the learned scorer chooses its own settings from the usage it learned, as
// the service does (pick.Learned.Tune), and they are printed with the held-out score
// they were chosen on; the old fixed defaults (toolret.FixedDefaults) are scored beside.
func Eval(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(out)
	dir := fs.String("data", shareddata.Dir("toolret"), "the toolret directory (default ../shared/testdata/toolret)")
	folds := fs.Int("folds", 5, "cross-validation folds: tune on all but one, score on that one; 0 scores the defaults on all queries")
	usage := fs.String("usage", "", "learn from DIR/<benchmark>/queries.jsonl (requests and the tools that ran for them), then score -data's queries with what was learned")
	usageCV := fs.Bool("usage-cv", false, "cross-validate learning: learn from the queries of all folds but one (-folds), score the one left out")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ops.ConfigError(err)
	}
	if fs.NArg() > 0 {
		return ops.ConfigError(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if *dir == "" {
		return ops.ConfigError(errors.New("toolret data not found; pass -data or set TOOLFLEET_SHARED"))
	}
	switch {
	case *usage != "":
		res, err := toolret.EvaluateUsage(ctx, *dir, *usage, pick.LearnConfig{})
		if err != nil {
			return err
		}
		toolret.WriteUsage(out, res)
		return nil
	case *usageCV:
		if *folds < 2 {
			return ops.ConfigError(fmt.Errorf("-usage-cv needs -folds of at least 2, got %d", *folds))
		}
		cv, err := toolret.CrossValidateUsage(ctx, *dir, *folds, pick.LearnConfig{})
		if err != nil {
			return err
		}
		cv.Write(out)
		return nil
	case *folds == 0:
		_, err := toolret.Report(ctx, out, *dir)
		return err
	case *folds < 2:
		return ops.ConfigError(fmt.Errorf("-folds must be 0 or at least 2, got %d", *folds))
	}
	cv, err := toolret.CrossValidate(ctx, *dir, *folds, toolret.Grid())
	if err != nil {
		return err
	}
	cv.Write(out)
	fmt.Fprintf(out, "tuned on all queries: %s\n", cv.AllQueries.Name)
	return nil
}
