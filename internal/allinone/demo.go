package allinone

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
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
}

// ErrDemoFailed is returned when the demo's run or load did not end as it must.
var ErrDemoFailed = fmt.Errorf("demo failed")

// Demo starts the fleet, runs an agent conversation through it, prints the run's
// timeline, then drives a load of tool calls and prints its summary.
func Demo(ctx context.Context, o DemoOptions) error {
	if o.Calls <= 0 {
		o.Calls = 3000
	}
	out := o.Out
	start := time.Now()
	f, err := Start(ctx, o.Fleet)
	if err != nil {
		return err
	}
	defer f.Stop()
	fmt.Fprintf(out, "toolfleet demo: embedded JetStream (%s), an executor serving %s, the picker and the planner, in one process (started in %s)\n",
		f.Server.ClientURL(), "calculator, get_time, echo, sleep, read_file, list_dir, write_file", time.Since(start).Round(time.Millisecond))
	if f.Model == ScriptedModelName {
		fmt.Fprintln(out, "model: scripted model — no LLM (set TOOLFLEET_MODEL, e.g. ollama/llama3.1, to use a real one)")
	} else {
		fmt.Fprintf(out, "model: %s\n", f.Model)
	}

	run, err := agentRun(ctx, f, out)
	if err != nil {
		return err
	}
	printTimeline(out, run)
	ok := run.Termination == planner.TerminationCompleted
	if f.Model == ScriptedModelName && !scriptedRunAsExpected(run) {
		ok = false
	}

	fmt.Fprintf(out, "\nload: %d tool calls published as call events, as any NATS client would\n", o.Calls)
	sum, err := load(ctx, f, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "summary: %d calls in %s: %.0f calls/s, p50 %s, p99 %s, retries %d, failures %d, lost %d, doubled %d\n",
		o.Calls, sum.elapsed.Round(time.Millisecond), float64(o.Calls)/sum.elapsed.Seconds(),
		sum.p50.Round(10*time.Microsecond), sum.p99.Round(10*time.Microsecond), sum.retries, sum.failures, sum.lost, sum.doubled)
	if !ok || sum.lost > 0 || sum.doubled > 0 || sum.failures > 0 {
		return fmt.Errorf("%w: run %s, load lost %d doubled %d failed %d", ErrDemoFailed, run.Termination, sum.lost, sum.doubled, sum.failures)
	}
	fmt.Fprintln(out, "demo ok")
	return nil
}

const demoInput = "Two orders came in, for 17 and 25 widgets at 2 credits each. Work out the total, " +
	"write it to report.txt in the workspace, and check the file."

// agentRun runs the demo conversation, approving write_file when it asks, and returns
// the finished run.
func agentRun(ctx context.Context, f *Fleet, out io.Writer) (*planner.Run, error) {
	approvals := make(chan events.ApprovalRequest, 4)
	sub, err := f.NC.Subscribe("toolfleet.event.approval.requested.>", func(m *nats.Msg) {
		e, err := events.Decode(m, 0)
		var req events.ApprovalRequest
		if err == nil && e.DataAs(&req) == nil {
			approvals <- req
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()

	run, err := f.Planner.Start(ctx, planner.StartRequest{Input: demoInput,
		Tools:  []string{"get_time", "list_dir", "calculator", "write_file", "read_file"},
		Limits: planner.Limits{MaxSteps: 10}})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "\nrun %s: %q\n", run.ID, demoInput)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := make(chan *planner.Run, 1)
	waitErr := make(chan error, 1)
	go func() {
		r, err := f.Planner.Wait(ctx, run.ID)
		if err != nil {
			waitErr <- err
			return
		}
		done <- r
	}()
	for {
		select {
		case req := <-approvals:
			fmt.Fprintf(out, "  approval requested for %s %s (%s)\n  → the demo approves it automatically (a human or a policy service would answer this event)\n",
				req.Tool, short(req.Arguments, 60), req.Reason)
			if err := f.Planner.Approve(ctx, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "demo"}); err != nil {
				return nil, err
			}
		case r := <-done:
			return r, nil
		case err := <-waitErr:
			return nil, err
		case err := <-f.Err():
			return nil, err
		}
	}
}

// scriptedRunAsExpected checks the scripted run took the path the script describes: a
// parallel step, an invalid call and its repair, an approved write, a final answer.
func scriptedRunAsExpected(r *planner.Run) bool {
	statuses := map[string][]string{}
	for _, c := range r.Calls {
		statuses[c.Name] = append(statuses[c.Name], c.Status)
	}
	return len(r.Calls) == 6 && r.Calls[0].Step == r.Calls[1].Step &&
		strings.Join(statuses["calculator"], ",") == "invalid,ok" &&
		strings.Join(statuses["write_file"], ",") == "ok" && strings.Join(statuses["read_file"], ",") == "ok" &&
		strings.Contains(r.Answer, "84")
}

func printTimeline(out io.Writer, r *planner.Run) {
	fmt.Fprintf(out, "\ntimeline of run %s\n", r.ID)
	fmt.Fprintf(out, "  %-4s %-11s %-44s %-8s %3s %8s  %s\n", "step", "tool", "arguments", "status", "att", "duration", "result")
	for _, c := range r.Calls {
		fmt.Fprintf(out, "  %-4d %-11s %-44s %-8s %3d %7dms  %s\n", c.Step, c.Name, short(c.Arguments, 44), c.Status,
			c.Attempts, c.DurationMS, short(c.Output, 70))
	}
	var dur time.Duration
	if r.FinishedAt != nil {
		dur = r.FinishedAt.Sub(r.CreatedAt)
	}
	fmt.Fprintf(out, "answer: %s\n", r.Answer)
	fmt.Fprintf(out, "termination: %s, steps: %d, tool calls: %d, tokens: %d, duration: %s\n",
		r.Termination, r.Step+1, len(r.Calls), r.Usage.Total(), dur.Round(time.Millisecond))
}

// short renders JSON on one line, cut to n characters.
func short(raw json.RawMessage, n int) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
