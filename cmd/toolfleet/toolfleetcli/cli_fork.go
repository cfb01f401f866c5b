package toolfleetcli

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// runsFork is `toolfleet runs fork RUN --from-step K [edits]`: the edits of `runs
// resume`, plus the fork's model and tools.
func (c *cli) runsFork() *cobra.Command {
	var r runs.ForkRequest
	var compact, summary, timeout string
	var maxSteps int
	var wait, follow, quiet bool
	cmd := &cobra.Command{
		Use:   "fork RUN --from-step K",
		Short: "Rerun a run from a step, as a new run (earlier steps' calls are reused, not run again)",
		Long: `Start a new run whose conversation is RUN's as its model was asked it at step K,
edited like a resume (indices of GET /v1/runs/RUN/messages?view=model&step=K). The calls
of the steps before K are not run again: their recorded results are reused. The fork
runs as you, with your rights, and names RUN and K in its forkedFrom.`,
		Example: `  toolfleet runs fork r1gpQk66 --from-step 2 --input "Use the EU price list" --follow
  toolfleet runs fork r1gpQk66 --from-step 0 --model big --tools search,fetch`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("from-step") {
				return usageErrorf("give the step to take anew: --from-step K (0 is the first)")
			}
			if quiet && (wait || follow || c.output == "json") {
				return usageErrorf("-q prints only the fork's id: not with --wait, --follow or -o json")
			}
			if err := editsFromFlags(&r.ResumeRequest, compact, summary, maxSteps, timeout); err != nil {
				return err
			}
			api, err := c.startingAPI(wait, follow)
			if err != nil {
				return err
			}
			run, err := api.Fork(cmd.Context(), args[0], r)
			if err != nil {
				return c.failed(api, err)
			}
			if quiet {
				fmt.Fprintln(c.stdout, run.ID)
				return nil
			}
			return c.afterStart(cmd.Context(), api, run, follow, wait,
				fmt.Sprintf("run %s forked from %s at step %d (%s)", run.ID, args[0], r.FromStep, run.Status))
		},
	}
	cmd.Flags().IntVar(&r.FromStep, "from-step", 0, "the step taken anew (0 is the first)")
	cmd.Flags().StringVar(&r.Model, "model", "", "the fork's model (default: the run's)")
	cmd.Flags().StringSliceVar(&r.Tools, "tools", nil, "the fork's tools (default: the run's, less those you may not call)")
	cmd.Flags().StringVar(&r.Input, "input", "", "a user message added after the conversation")
	cmd.Flags().IntSliceVar(&r.Drop, "drop", nil, "indices of messages to drop")
	cmd.Flags().StringVar(&compact, "compact", "", "FROM:TO, messages replaced by --summary")
	cmd.Flags().StringVar(&summary, "summary", "", "the summary that replaces the --compact range")
	cmd.Flags().IntVar(&maxSteps, "max-steps", 0, "the fork's maxSteps limit")
	cmd.Flags().StringVar(&timeout, "timeout", "", "the fork's wall-clock limit (a duration, e.g. 5m)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the fork's end and print it")
	cmd.Flags().BoolVar(&follow, "follow", false, "show the fork's steps and calls as they happen, then its end")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the fork's id")
	return cmd
}

// runsDiff is `toolfleet runs diff A B`: the two runs compared step by step, as a
// table (-o json: the API's answer).
func (c *cli) runsDiff() *cobra.Command {
	return &cobra.Command{
		Use:               "diff A B",
		Short:             "Compare two runs step by step (from the fork point for a run and its fork)",
		Example:           "  toolfleet runs diff r1gpQk66 r7Hs2aQ1\n  toolfleet runs diff r1gpQk66 r7Hs2aQ1 -o json",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			d, err := api.Diff(cmd.Context(), args[0], args[1])
			if err != nil {
				return c.failed(api, err)
			}
			if c.output == "json" {
				return c.printJSON(d)
			}
			c.showDiff(d)
			return nil
		},
	}
}

// showDiff prints a diff: a line per side, a row per aligned step and per call that
// differs, and the totals.
func (c *cli) showDiff(d *runs.RunDiff) {
	w := c.stdout
	fmt.Fprintf(w, "A %s  %s  %s %s  %d steps\n", d.A.ID, d.A.Model, d.A.Status, d.A.Termination, d.A.Steps)
	fmt.Fprintf(w, "B %s  %s  %s %s  %d steps\n", d.B.ID, d.B.Model, d.B.Status, d.B.Termination, d.B.Steps)
	if d.Shared > 0 {
		fmt.Fprintf(w, "%d steps shared (before the fork point)\n", d.Shared)
	}
	fmt.Fprintln(w)
	t := newTable(w, "STEP A", "STEP B", "CHANGED", "TEXT", "CALLS", "TOKENS Δ", "COST Δ", "MS Δ")
	step := func(n *int) string {
		if n == nil {
			return "-"
		}
		return strconv.Itoa(*n)
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	for _, s := range d.Steps {
		changed := 0
		for _, cd := range s.Calls {
			if callChanged(cd) {
				changed++
			}
		}
		text := "same"
		if s.TextChanged {
			text = "changed"
		}
		t.row(step(s.A), step(s.B), yes(s.Changed), text, fmt.Sprintf("%d (%d changed)", len(s.Calls), changed),
			signed(s.Tokens.Delta), fmt.Sprintf("%+.4f", s.Cost.Delta), signed(s.DurationMS.Delta))
	}
	t.flush()
	for _, s := range d.Steps {
		for _, cd := range s.Calls {
			if !callChanged(cd) {
				continue
			}
			fmt.Fprintf(w, "\nstep %s/%s %s #%d:", step(s.A), step(s.B), cd.Tool, cd.Index)
			switch {
			case cd.A == nil:
				fmt.Fprint(w, " only in B")
			case cd.B == nil:
				fmt.Fprint(w, " only in A")
			case cd.StatusChanged:
				fmt.Fprintf(w, " status %s → %s", cd.A.Status, cd.B.Status)
			}
			fmt.Fprintln(w)
			for _, p := range []struct {
				what string
				ops  []runs.PatchOp
			}{{"arguments", cd.Arguments}, {"result", cd.Result}} {
				for _, op := range p.ops {
					fmt.Fprintf(w, "  %s %s %s %s\n", p.what, op.Op, op.Path, compactValue(op.Value))
				}
			}
		}
	}
	fmt.Fprintf(w, "\n%d of %d steps changed, %d of %d calls; tokens %s, cost %+.4f, time %s ms\n",
		d.Totals.ChangedSteps, d.Totals.Steps, d.Totals.ChangedCalls, d.Totals.Calls,
		signed(d.Totals.Tokens.Delta), d.Totals.Cost.Delta, signed(d.Totals.DurationMS.Delta))
}

func callChanged(cd runs.CallDiff) bool {
	return cd.A == nil || cd.B == nil || len(cd.Arguments) > 0 || len(cd.Result) > 0 || cd.StatusChanged || cd.ErrorChanged
}

func signed(v float64) string { return fmt.Sprintf("%+d", int64(v)) }

// compactValue is a patch operation's value on one line, cut at 80 bytes.
func compactValue(v json.RawMessage) string {
	s := string(v)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
