package toolfleetcli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// runEnd is how `run --wait|--follow`, `runs watch` and `runs send --wait` exit: 0
// when the run completed (or a final tool or stop condition ended it), 1 otherwise
// (canceled, an error threshold, a timeout, …, or paused), so that scripts can test it.
func runEnd(r *runs.Run) error {
	if r.Status == runs.StatusPaused && r.Paused != nil { // waited for with --wait: not an end
		return &exitError{code: exitFailure, err: fmt.Errorf("run %s is paused before step %d (%s): go on with toolfleet runs resume %s",
			r.ID, r.Paused.Step, r.Paused.Reason, r.ID)}
	}
	switch r.Termination {
	case "completed", "final_tool", "stop_condition", "stop_hook":
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("run %s ended %s: %s", r.ID, r.Termination, r.Detail)}
}

func (c *cli) runCommand() *cobra.Command {
	var req runs.StartRequest
	var wait, follow, quiet, pauseEveryStep bool
	var maxSteps int
	var costBudget float64
	var pauseAfter []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   `run "INPUT" [--tools a,b] [--wait|--follow]`,
		Short: "Start a run",
		Long: `Start a run with INPUT as the user's message. Without --wait or --follow it prints the
run's id and returns; --wait waits for the run's end and prints it; --follow shows its
steps and calls as they happen, then its end. With either, the exit code is 0 when the
run completed and 1 when it ended otherwise (canceled, timeout, error threshold, ...).
-q prints nothing but the id, for scripts.`,
		Example: `  toolfleet run "What is 6*7?" --tools calculator --wait
  toolfleet run "Summarize the report" --follow
  toolfleet run "Clean up staging" --pause-after delete_files --cost-budget 0.50
  id=$(toolfleet run "Summarize the report" -q)
  toolfleet run "Clean up staging" -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.startingAPI(wait, follow)
			if err != nil {
				return err
			}
			if quiet && (wait || follow || c.output == "json") {
				return usageErrorf("-q prints only the run's id: not with --wait, --follow or -o json")
			}
			req.Input = args[0]
			if costBudget < 0 {
				return usageErrorf("--cost-budget %v: want a cost above 0", costBudget)
			}
			if maxSteps > 0 || timeout > 0 || costBudget > 0 {
				req.Limits = &runs.Limits{MaxSteps: maxSteps, CostBudget: costBudget}
				if timeout > 0 {
					req.Limits.Timeout = timeout.String()
				}
			}
			if pauseEveryStep || len(pauseAfter) > 0 {
				req.Pause = &runs.PauseOptions{AfterEveryStep: pauseEveryStep, AfterTools: pauseAfter}
			}
			run, err := api.Start(cmd.Context(), req)
			if err != nil {
				return c.failed(api, err)
			}
			if quiet {
				fmt.Fprintln(c.stdout, run.ID)
				return nil
			}
			return c.afterStart(cmd.Context(), api, run, follow, wait,
				fmt.Sprintf("run %s started (%s)\n  follow it: toolfleet runs watch %s", run.ID, run.Status, run.ID))
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&req.Tools, "tools", nil, "the run's tools, comma-separated (default: the whole catalog)")
	f.StringVar(&req.Model, "model", "", "one of the planner's models (default: its default)")
	f.StringVar(&req.System, "system", "", "a system prompt")
	f.StringVar(&req.ToolChoice, "tool-choice", "", "auto, required, none, or one tool's name")
	f.IntVar(&maxSteps, "max-steps", 0, "the most model calls (default: the planner's, 10)")
	f.DurationVar(&timeout, "timeout", 0, "the run's wall-clock limit, e.g. 2m (default: the planner's, 5m)")
	f.Float64Var(&costBudget, "cost-budget", 0, "the most the run and its nested runs may cost (the planner's price table)")
	f.BoolVar(&pauseEveryStep, "pause", false, "pause after every step, until 'toolfleet runs resume'")
	f.StringSliceVar(&pauseAfter, "pause-after", nil, "pause after a step that called one of these tools, comma-separated")
	f.StringToStringVar(&req.Metadata, "metadata", nil, "key=value pairs kept with the run")
	f.BoolVar(&wait, "wait", false, "wait for the run's end and print it")
	f.BoolVar(&follow, "follow", false, "show the run's steps and calls as they happen, then its end")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the run's id")
	_ = cmd.RegisterFlagCompletionFunc("tools", c.completeTools)
	return cmd
}

func (c *cli) runsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show, watch, cancel, pause, resume, continue, fork and compare runs",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(c.runsList(), c.runsGet(), c.runsWatch(), c.runsMessages(), c.runsCancel(), c.runsPause(), c.runsResume(), c.runsSend(), c.runsFork(), c.runsDiff())
	return cmd
}

func (c *cli) runsList() *cobra.Command {
	var f runs.RunFilter
	var since, until string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List runs, newest first",
		Example: `  toolfleet runs ls --status running
  toolfleet runs ls --tool write_file --since 1h
  toolfleet runs ls --outcome tool_errors --metadata team=ops
  toolfleet runs ls -q invoice -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Status != "" && !slices.Contains(runStatuses, f.Status) {
				return usageErrorf("--status %q: want %s", f.Status, strings.Join(runStatuses, ", "))
			}
			if f.Outcome != "" && !slices.Contains(runOutcomes, f.Outcome) {
				return usageErrorf("--outcome %q: want %s", f.Outcome, strings.Join(runOutcomes, ", "))
			}
			var err error
			if f.Since, err = parseSince(since, "--since"); err != nil {
				return err
			}
			if f.Until, err = parseSince(until, "--until"); err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			page, err := api.ListRuns(cmd.Context(), f)
			if err != nil {
				return c.failed(api, err)
			}
			if c.output == "json" {
				return c.printJSON(page)
			}
			c.runsTable(page.Runs)
			if page.Next != "" {
				fmt.Fprintf(c.stderr, "more: toolfleet runs ls --cursor %s\n", page.Next)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Status, "status", "", "running, awaiting_approval, paused or done")
	fl.StringVar(&f.Termination, "termination", "", "how the runs ended: completed, canceled, timeout, ...")
	fl.StringVar(&f.Outcome, "outcome", "", "how the finished runs' calls went: clean, tool_errors or denied")
	fl.StringToStringVar(&f.Metadata, "metadata", nil, "runs whose metadata has every KEY=VALUE given (repeatable, or comma-separated)")
	fl.StringVar(&f.Tool, "tool", "", "runs that called this tool")
	fl.StringVar(&f.Parent, "parent", "", "the nested runs of this run")
	fl.StringVar(&since, "since", "", "runs created since: a duration ago (1h) or an RFC 3339 time")
	fl.StringVar(&until, "until", "", "runs created until: a duration ago or an RFC 3339 time")
	fl.StringVarP(&f.Query, "query", "q", "", "runs whose input contains this text")
	fl.IntVar(&f.Limit, "limit", 0, "runs on the page, 1 to 500 (default 50)")
	fl.StringVar(&f.Cursor, "cursor", "", "the page after the one that printed this cursor")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(runStatuses, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("outcome", cobra.FixedCompletions(runOutcomes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("tool", c.completeTools)
	return cmd
}

// runStatuses are the statuses runs ls filters on.
var runStatuses = []string{runs.StatusRunning, runs.StatusAwaitingApproval, runs.StatusPaused, runs.StatusDone}

// runOutcomes are the outcomes runs ls filters on.
var runOutcomes = []string{runs.OutcomeClean, runs.OutcomeToolErrors, runs.OutcomeDenied}

// runsTable prints runs as runs ls shows them: how each is doing or ended (a run
// waiting on a person with its approval deadline), how long it ran and when it
// finished, its failed calls and refused approvals, and its cost when it has one.
func (c *cli) runsTable(list []runs.RunSummary) {
	cost := slices.ContainsFunc(list, func(r runs.RunSummary) bool { return r.Cost > 0 })
	headers := []string{"ID", "STATUS", "TERMINATION", "OUTCOME", "STEPS", "CALLS", "ERRORS/DENIALS", "APPROVALS", "DURATION", "AGE", "FINISHED"}
	if cost {
		headers = append(headers, "COST")
	}
	t := newTable(c.stdout, append(headers, "INPUT")...)
	for _, r := range list {
		status := r.Status
		switch {
		case r.ApprovalDeadline != nil:
			status += " until " + r.ApprovalDeadline.Local().Format(time.DateTime)
		case r.PauseReason != "":
			status += " (" + r.PauseReason + ")"
		}
		finished := "-"
		if r.FinishedAt != nil {
			finished = age(*r.FinishedAt) + " ago"
		}
		cells := []any{r.ID, status, orDash(r.Termination), orDash(r.Outcome), r.Steps, r.Calls,
			fmt.Sprintf("%d/%d", r.ToolErrors, r.Denials), r.PendingApprovals, millis(r.DurationMS), age(r.CreatedAt), finished}
		if cost {
			cells = append(cells, fmt.Sprintf("%.4f", r.Cost))
		}
		t.row(append(cells, short(r.Input, 50))...)
	}
	t.flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseSince reads a time as a duration ago or an RFC 3339 time; empty is none.
func parseSince(v, flag string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErrorf("%s %q: want a duration (1h30m) or an RFC 3339 time (2026-05-01T10:00:00Z)", flag, v)
	}
	return t, nil
}

func (c *cli) runsGet() *cobra.Command {
	return &cobra.Command{
		Use:               "get RUN",
		Short:             "Show a run: its status, answer and every call with its timeline",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			run, err := api.Get(cmd.Context(), args[0])
			if err != nil {
				return c.failed(api, err)
			}
			return c.showRun(run)
		},
	}
}

func (c *cli) runsMessages() *cobra.Command {
	var view string
	cmd := &cobra.Command{
		Use:   "messages RUN [--view run|model]",
		Short: "Show a run's conversation, numbered as runs resume --drop and --compact take it",
		Long: `Show a run's conversation, one message a row with its index: the run's record of it
(--view run, the default), or, for a paused run, the conversation as its model will be
asked it once resumed (--view model): the indices 'toolfleet runs resume' edits name.
-o json prints the messages as the API answers them.`,
		Example: `  toolfleet runs messages r1gpQk66 --view model
  toolfleet runs resume r1gpQk66 --drop 3`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			if view != runs.ViewRun && view != runs.ViewModel {
				return usageErrorf("--view %q: want run or model", view)
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			msgs, err := api.Messages(cmd.Context(), args[0], view)
			if err != nil {
				return c.failed(api, err)
			}
			if c.output == "json" {
				return c.printJSON(msgs)
			}
			t := newTable(c.stdout, "INDEX", "ROLE", "CONTENT")
			for i, m := range msgs {
				t.row(i, m.Role, short(messageContent(m), 100))
			}
			t.flush()
			return nil
		},
	}
	cmd.Flags().StringVar(&view, "view", runs.ViewRun, "run (the run's record) or model (a paused run, as its model will be asked it)")
	_ = cmd.RegisterFlagCompletionFunc("view", cobra.FixedCompletions([]string{runs.ViewRun, runs.ViewModel}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// messageContent is a message in one line: its text, its tool calls (→ name args) and
// its tools' results (← name content).
func messageContent(m runs.Message) string {
	var parts []string
	if m.Text != "" {
		parts = append(parts, m.Text)
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, "→ "+tc.Name+" "+string(tc.Arguments))
	}
	for _, tr := range m.ToolResults {
		parts = append(parts, "← "+tr.Name+" "+string(tr.Content))
	}
	return strings.Join(parts, " · ")
}

func (c *cli) runsWatch() *cobra.Command {
	var after uint64
	cmd := &cobra.Command{
		Use:   "watch RUN",
		Short: "Show a run's steps and calls as they happen, until it ends",
		Long: `Show a run's events as they happen (Server-Sent Events), from its first or from the one
after --after SEQ (each event's sequence is the first column; -o json prints each event
as a JSON line), until the run ends. Exit 0 when the run completed, 1 otherwise.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			// The run's creation time stamps its "run started" line; a view that starts
			// after that event, or prints JSON, needs none.
			var created time.Time
			if after == 0 && c.output != "json" {
				run, err := api.Get(cmd.Context(), args[0])
				if err != nil {
					return c.failed(api, err)
				}
				created = run.CreatedAt
			}
			return c.watch(cmd.Context(), api, args[0], after, created)
		},
	}
	cmd.Flags().Uint64Var(&after, "after", 0, "resume after the event with this sequence")
	return cmd
}

func (c *cli) runsCancel() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:               "cancel RUN",
		Short:             "Cancel a run: its calls are canceled, its nested runs too",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.controlRun(func(api *runs.Client) (*runs.Run, error) {
				return api.Cancel(cmd.Context(), args[0], reason)
			}, func(run *runs.Run) {
				fmt.Fprintf(c.stdout, "run %s canceled: %s\n", run.ID, run.Detail)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	return cmd
}

// controlRun asks the API to act on a run (do) and prints the run it answers: as JSON
// with -o json, else what say writes.
func (c *cli) controlRun(do func(*runs.Client) (*runs.Run, error), say func(*runs.Run)) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	run, err := do(api)
	if err != nil {
		return c.failed(api, err)
	}
	if c.output == "json" {
		return c.printJSON(run)
	}
	say(run)
	return nil
}

func (c *cli) runsPause() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:               "pause RUN",
		Short:             "Pause a run at its next step boundary (its current step's calls finish first)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.controlRun(func(api *runs.Client) (*runs.Run, error) {
				return api.Pause(cmd.Context(), args[0], reason)
			}, func(run *runs.Run) {
				if run.Status == runs.StatusPaused {
					fmt.Fprintf(c.stdout, "run %s is paused (before step %d)\n", run.ID, run.Paused.Step)
				} else {
					fmt.Fprintf(c.stdout, "run %s pauses at its next step boundary\n", run.ID)
				}
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	return cmd
}

func (c *cli) runsResume() *cobra.Command {
	var r runs.ResumeRequest
	var compact, summary string
	var maxSteps int
	var timeout string
	var stopPausing bool
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Resume a paused run, optionally editing its conversation and limits",
		Example: `  toolfleet runs resume r1gpQk66
  toolfleet runs resume r1gpQk66 --compact 0:4 --summary "The totals are computed." --input "Now write the report"
  toolfleet runs messages r1gpQk66 --view model   # the indices --drop and --compact take
  toolfleet runs resume r1gpQk66 --drop 5 --max-steps 20 --stop-pausing`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := editsFromFlags(&r, compact, summary, maxSteps, timeout); err != nil {
				return err
			}
			if stopPausing {
				r.Pause = &runs.PauseOptions{}
			}
			return c.controlRun(func(api *runs.Client) (*runs.Run, error) {
				return api.Resume(cmd.Context(), args[0], r)
			}, func(run *runs.Run) {
				fmt.Fprintf(c.stdout, "run %s resumed (%s)\n", run.ID, run.Status)
			})
		},
	}
	cmd.Flags().StringVar(&r.Input, "input", "", "a user message added after the conversation")
	cmd.Flags().IntSliceVar(&r.Drop, "drop", nil, "indices of messages to drop (as 'toolfleet runs messages RUN --view model' numbers them)")
	cmd.Flags().StringVar(&compact, "compact", "", "FROM:TO, messages replaced by --summary")
	cmd.Flags().StringVar(&summary, "summary", "", "the summary that replaces the --compact range")
	cmd.Flags().IntVar(&maxSteps, "max-steps", 0, "new maxSteps limit")
	cmd.Flags().StringVar(&timeout, "timeout", "", "new wall-clock limit (a duration, e.g. 5m)")
	cmd.Flags().BoolVar(&stopPausing, "stop-pausing", false, "pause no more after steps or tools")
	return cmd
}

func (c *cli) runsSend() *cobra.Command {
	var f runs.FollowUp
	var wait, follow bool
	cmd := &cobra.Command{
		Use:               `send RUN "MESSAGE" [--wait|--follow]`,
		Short:             "Continue a run with a follow-up message (a run that ended is reopened)",
		Example:           `  toolfleet runs send r1gpQk66 "Now write it as a table" --follow`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.startingAPI(wait, follow)
			if err != nil {
				return err
			}
			f.Input = args[1]
			run, err := api.FollowUp(cmd.Context(), args[0], f)
			if err != nil {
				return c.failed(api, err)
			}
			return c.afterStart(cmd.Context(), api, run, follow, wait,
				fmt.Sprintf("run %s continued (turn %d, %s)", run.ID, run.Turn, run.Status))
		},
	}
	cmd.Flags().StringVar(&f.ID, "id", "", "an idempotency key: a follow-up with an id the run has taken is not added again")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the run's end and print it")
	cmd.Flags().BoolVar(&follow, "follow", false, "show the run's steps and calls as they happen, then its end")
	return cmd
}

// watch shows the run's events live, then the run; it exits as [runEnd] says. created
// is when the run was created (zero: the started event's own time).
func (c *cli) watch(ctx context.Context, api *runs.Client, id string, after uint64, created time.Time) error {
	live := newLiveView(c.stdout, c.output == "json", created)
	for ev, err := range api.Follow(ctx, id, after) {
		if err != nil {
			return c.failed(api, err)
		}
		if err := live.show(ev); err != nil {
			return err
		}
	}
	run, err := api.Get(ctx, id)
	if err != nil {
		return c.failed(api, err)
	}
	if c.output != "json" {
		fmt.Fprintln(c.stdout)
		if err := c.showRun(run); err != nil {
			return err
		}
	}
	return runEnd(run)
}

// showRun prints a run: JSON, or a summary and its calls as a table.
func (c *cli) showRun(r *runs.Run) error {
	if c.output == "json" {
		return c.printJSON(r)
	}
	w := c.stdout
	status := r.Status
	if r.Termination != "" {
		status += " (" + r.Termination + ")"
	}
	if r.Outcome != "" {
		status += fmt.Sprintf(", %s: %d tool errors, %d denials", r.Outcome, r.ToolErrors, r.Denials)
	}
	fmt.Fprintf(w, "run %s: %s\n", r.ID, status)
	if r.ApprovalDeadline != nil {
		fmt.Fprintf(w, "  waiting: for an approval; unanswered approvals are denied at %s\n", r.ApprovalDeadline.Local().Format(time.DateTime))
	}
	if r.PausedAt != nil {
		by := r.PausedBy
		if by == "" {
			by = "its pause rule"
		}
		fmt.Fprintf(w, "  paused:  since %s by %s: %s\n", r.PausedAt.Local().Format(time.DateTime), by, r.PauseReason)
	}
	if r.Detail != "" && r.Detail != r.Termination {
		fmt.Fprintf(w, "  detail:  %s\n", r.Detail)
	}
	fmt.Fprintf(w, "  model:   %s, %d steps, %d tokens", r.Model, r.Steps, r.Tokens)
	if r.Cost > 0 {
		fmt.Fprintf(w, ", cost %.4f", r.Cost)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  created: %s", r.CreatedAt.Local().Format(time.DateTime))
	if r.FinishedAt != nil {
		fmt.Fprintf(w, ", took %s", (time.Duration(r.DurationMS) * time.Millisecond).String())
	}
	fmt.Fprintln(w)
	if r.ParentID != "" {
		fmt.Fprintf(w, "  parent:  %s (depth %d)\n", r.ParentID, r.Depth)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	if len(r.Calls) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "STEP", "CALL", "TOOL", "STATUS", "ATTEMPTS", "DURATION", "APPROVAL WAIT", "RESULT")
		for _, call := range r.Calls {
			result := string(call.Output)
			if call.Error != nil {
				result = string(call.Error.Code) + ": " + call.Error.Message
			}
			if call.Status == runs.CallAwaitingApproval {
				result = "toolfleet approvals approve " + call.ID
			}
			duration := millis(call.DurationMS)
			if call.DurationMS == 0 && call.ApprovalWaitMS == 0 { // under a millisecond: to the microsecond
				duration = took(call.CalledAt, call.FinishedAt)
			}
			t.row(call.Step, call.ID, call.Name, call.Status, call.Attempts, duration, millis(call.ApprovalWaitMS), short(result, 70))
		}
		t.flush()
	}
	if r.Answer != "" {
		fmt.Fprintf(w, "\nanswer: %s\n", r.Answer)
	}
	return nil
}

// took is how long a call took from called to finished, "-" while it has not finished:
// to the microsecond under a millisecond (a fast call is not "-"), else to the
// millisecond.
func took(called time.Time, finished *time.Time) string {
	if finished == nil || called.IsZero() {
		return "-"
	}
	d := finished.Sub(called)
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// editsFromFlags puts the conversation and limit edits that runs resume and runs fork
// share into r: --compact FROM:TO with --summary, --max-steps, --timeout.
func editsFromFlags(r *runs.ResumeRequest, compact, summary string, maxSteps int, timeout string) error {
	if compact != "" {
		from, to, ok := strings.Cut(compact, ":")
		f, ferr := strconv.Atoi(from)
		t, terr := strconv.Atoi(to)
		if !ok || ferr != nil || terr != nil || summary == "" {
			return usageErrorf("--compact is FROM:TO (message indices, TO exclusive) and needs --summary")
		}
		r.Compact = &runs.Compaction{From: f, To: t, Summary: summary}
	}
	if maxSteps > 0 || timeout != "" {
		r.Limits = &runs.Limits{MaxSteps: maxSteps, Timeout: timeout}
	}
	return nil
}

// millis shows a duration in milliseconds; 0 is "-".
func millis(v int64) string {
	if v == 0 {
		return "-"
	}
	return (time.Duration(v) * time.Millisecond).String()
}

// age is how long ago t was, to the second (kubectl's AGE column).
func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// afterStart shows a run just started or continued: followed live, waited for and
// printed, or as it stands (summary in a table's place).
func (c *cli) afterStart(ctx context.Context, api *runs.Client, run *runs.Run, follow, wait bool, summary string) error {
	switch {
	case follow:
		return c.watch(ctx, api, run.ID, 0, run.CreatedAt)
	case wait:
		run, err := api.Wait(ctx, run.ID)
		if err != nil {
			return c.failed(api, err)
		}
		if err := c.showRun(run); err != nil {
			return err
		}
		return runEnd(run)
	}
	if c.output == "json" {
		return c.printJSON(run)
	}
	fmt.Fprintln(c.stdout, summary)
	return nil
}

// startingAPI is the planner's client for a command that starts or continues a run and
// then waits for it or follows it (one of the two at most).
func (c *cli) startingAPI(wait, follow bool) (*runs.Client, error) {
	if wait && follow {
		return nil, usageErrorf("give --wait or --follow, not both")
	}
	return c.api()
}
