package toolfleetcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// DemoOptions configure the demo.
type DemoOptions struct {
	Fleet Options
	// Calls is the size of the load after the agent run. Default 3000.
	Calls int
	// Out receives the report; Progress the progress bar (a terminal) or progress lines.
	Out, Progress io.Writer
	// ProgressTTY draws the bar in place with \r; otherwise a line every 10%.
	ProgressTTY bool
	// StallTimeout ends the load when no result arrived for this long; the calls still
	// unanswered are then lost. Default 10s.
	StallTimeout time.Duration
}

// ErrDemoFailed is returned when the demo's run or load did not end as it must.
var ErrDemoFailed = errors.New("demo failed")

// demoTools are the tools the agent run may use.
var demoTools = []string{"get_time", "list_dir", "calculator", "write_file", "read_file"}

// Demo starts the fleet, runs an agent conversation through it, prints the run's
// timeline, then drives a load of tool calls and prints its summary. It returns an error
// wrapping [ErrDemoFailed] when the run did not end as expected (the scripted run must
// take its scripted path) or a call of the load was lost, doubled or failed.
func Demo(ctx context.Context, o DemoOptions) error {
	if o.Calls <= 0 {
		o.Calls = 3000
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	start := time.Now()
	f, err := Start(ctx, o.Fleet)
	if err != nil {
		return err
	}
	defer f.Stop()
	fmt.Fprintf(out, "toolfleet demo: embedded JetStream (%s, files in %s), an executor serving %s, the picker and the planner, in one process (started in %s)\n",
		f.Server.ClientURL(), f.DataDir, strings.Join(f.Tools, ", "), time.Since(start).Round(time.Millisecond))
	if isScripted(f.Model) {
		fmt.Fprintf(out, "model: %s: scripted model — no LLM (set TOOLFLEET_MODEL, e.g. ollama/llama3.1, to use a real one)\n", f.Model)
	} else {
		fmt.Fprintf(out, "model: %s (a real model may take another path than the script)\n", f.Model)
	}

	run, err := agentRun(ctx, f, out)
	if err != nil {
		return err
	}
	printTimeline(out, run)
	var problems []string
	if run.Termination != planner.TerminationCompleted {
		problems = append(problems, fmt.Sprintf("the run ended %s", run.Termination))
	}
	if f.Model == ScriptedModelName {
		if why := scriptedRunProblem(run); why != "" {
			problems = append(problems, "the scripted run "+why)
		}
	}

	fmt.Fprintf(out, "\nload: %d tool calls (echo, calculator, sleep 0s) published as call events, as any NATS client would\n", o.Calls)
	sum, err := load(ctx, f, o)
	if err != nil {
		return err
	}
	exactlyOnce := sum.Lost == 0 && sum.Doubled == 0 && sum.Answered == o.Calls
	fmt.Fprintf(out, "summary: %d calls in %s: %.0f calls/s, p50 %s, p99 %s, retries %d, failures %d, lost %d, doubled %d\n",
		o.Calls, sum.Elapsed.Round(time.Millisecond), sum.CallsPerSec(), ms(sum.P50), ms(sum.P99),
		sum.retries, sum.failures, sum.Lost, sum.Doubled)
	fmt.Fprintf(out, "results by status: %s; every call got exactly one result: %s\n", statuses(sum.byStatus), yesNo(exactlyOnce))
	if !exactlyOnce {
		problems = append(problems, fmt.Sprintf("the load lost %d and doubled %d results", sum.Lost, sum.Doubled))
	}
	if sum.failures > 0 || sum.undecoded > 0 {
		problems = append(problems, fmt.Sprintf("%d calls of the load failed and %d results did not decode", sum.failures, sum.undecoded))
	}
	if len(problems) > 0 {
		fmt.Fprintf(out, "demo FAILED: %s\n", strings.Join(problems, "; "))
		return fmt.Errorf("%w: %s", ErrDemoFailed, strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "demo ok in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

const demoInput = "Two orders came in, for 17 and 25 widgets at 2 credits each. Work out the total, " +
	"write it to report.txt in the workspace, and check the file."

// agentRun runs the demo conversation and returns the finished run. The demo plays the
// approver: it watches the approval requests on the event stream, as a human's console
// or a policy service would, and approves each through the planner.
func agentRun(ctx context.Context, f *Fleet, out io.Writer) (*planner.Run, error) {
	approvals := make(chan events.ApprovalRequest, 16)
	sub, err := f.NC.Subscribe(events.AllEvents, func(m *nats.Msg) {
		e, err := events.Decode(events.CoreMsg(m), 0)
		if err != nil || e.Type != events.TypeApprovalRequest {
			return
		}
		var req events.ApprovalRequest
		if e.DataAs(&req) == nil {
			approvals <- req
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()

	run, err := f.Planner.Start(ctx, planner.StartRequest{Input: demoInput, Tools: demoTools,
		Limits: planner.Limits{MaxSteps: 10}})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "\nrun %s with tools %s\n  user: %s\n", run.ID, strings.Join(demoTools, ", "), demoInput)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	var waiting sync.WaitGroup // the Wait below, which ends with ctx
	defer func() { cancel(); waiting.Wait() }()
	type waited struct {
		run *planner.Run
		err error
	}
	done := make(chan waited, 1)
	waiting.Go(func() {
		r, err := f.Planner.Wait(ctx, run.ID)
		done <- waited{r, err}
	})
	for {
		select {
		case req := <-approvals:
			if req.RunID != run.ID {
				continue
			}
			fmt.Fprintf(out, "  approval requested: %s %s (%s)\n", req.Tool, short(string(req.Arguments), 60), req.Reason)
			fmt.Fprintln(out, "  → the demo auto-approves it (in real use a person or a policy service answers this event: POST /v1/approvals/{callId} or NATS)")
			// The planner takes answers for calls its run shows awaiting approval; the
			// request reached the demo first.
			if err := awaitingApproval(ctx, f.Planner, run.ID, req.CallID); err != nil {
				return nil, fmt.Errorf("approve %s: %w", req.CallID, err)
			}
			if err := f.Planner.Approve(ctx, req.CallID, req.Caller, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "toolfleet-demo"}); err != nil {
				return nil, fmt.Errorf("approve %s: %w", req.CallID, err)
			}
		case w := <-done:
			if w.err != nil {
				return nil, fmt.Errorf("wait for run %s: %w", run.ID, w.err)
			}
			return w.run, nil
		case err := <-f.Err():
			return nil, err
		}
	}
}

// awaitingApproval waits until the run shows its call awaiting approval (or answered).
func awaitingApproval(ctx context.Context, p *planner.Planner, runID, callID string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := p.Get(ctx, runID)
		if err != nil {
			return err
		}
		for _, c := range r.Calls {
			if c.ID == callID && c.Status != string(planner.CallPending) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// isScripted reports whether model is a scripted one (the demo's, or a script file named
// by TOOLFLEET_MODEL=scripted/<file>), to label it as such.
func isScripted(model string) bool { return strings.HasPrefix(model, "scripted/") }

// scriptedRunProblem says how the scripted run strayed from its script — a parallel
// step, an invalid call and its repair, an approved write, a read, the answer — or "".
func scriptedRunProblem(r *planner.Run) string {
	var got []string
	for _, c := range r.Calls {
		got = append(got, fmt.Sprintf("%d:%s:%s", c.Step, c.Name, c.Status))
	}
	want := []string{"0:get_time:ok", "0:list_dir:ok", "1:calculator:invalid", "2:calculator:ok", "3:write_file:ok", "4:read_file:ok"}
	switch {
	case !slices.Equal(got, want):
		return fmt.Sprintf("made the calls %v, want %v", got, want)
	case !strings.Contains(r.Answer, "84"):
		return fmt.Sprintf("answered %q, without the total 84", r.Answer)
	}
	return ""
}

func printTimeline(out io.Writer, r *planner.Run) {
	fmt.Fprintf(out, "\ntimeline of run %s\n", r.ID)
	fmt.Fprintf(out, "  %-4s %-11s %-40s %-8s %3s %8s  %s\n", "step", "tool", "arguments", "status", "att", "duration", "result")
	for _, c := range r.Calls {
		result := short(string(c.Output), 64)
		if c.Error != nil {
			result = short(string(c.Error.Code)+": "+c.Error.Message, 64)
		}
		fmt.Fprintf(out, "  %-4d %-11s %-40s %-8s %3d %6dms  %s\n", c.Step, c.Name, short(string(c.Arguments), 40), c.Status,
			c.Attempts, c.DurationMS, result)
		if c.Error != nil && len(c.Error.Violations) > 0 {
			var v []string
			for _, x := range c.Error.Violations {
				v = append(v, strings.TrimSpace(x.Pointer+" "+x.Message))
			}
			fmt.Fprintf(out, "       ↳ fed back to the model to repair its call: %s\n", short(strings.Join(v, "; "), 90))
		}
	}
	var dur time.Duration
	if r.FinishedAt != nil {
		dur = r.FinishedAt.Sub(r.CreatedAt)
	}
	fmt.Fprintf(out, "answer: %s\n", r.Answer)
	detail := ""
	if r.Detail != "" {
		detail = " (" + r.Detail + ")"
	}
	fmt.Fprintf(out, "termination: %s%s, steps: %d, tool calls: %d, tokens: %d (in %d, out %d), duration: %s\n",
		r.Termination, detail, r.Step+1, len(r.Calls), r.Usage.Total(), r.Usage.InputTokens, r.Usage.OutputTokens, dur.Round(time.Millisecond))
}

// short puts s on one line, cut to n characters.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func statuses(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
