package toolfleetcli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// table writes aligned columns, kubectl style: upper-case headers, two spaces apart.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(headers, "\t"))
	return t
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// liveView prints a run's events as they come: one line each for what a person
// follows (steps, calls and their results, approvals, the end); -o json prints every
// event as a JSON line instead.
type liveView struct {
	w    io.Writer
	json bool
	// created is when the run was created, the time its "run started" line shows: the
	// started event is stamped when it is published, which can be after the first step
	// began (the planner takes it at once).
	created time.Time
}

// newLiveView prints events on w, as JSON lines or, with the run's creation time (zero
// when unknown), as lines for a person.
func newLiveView(w io.Writer, asJSON bool, created time.Time) *liveView {
	return &liveView{w: w, json: asJSON, created: created}
}

// eventLine is an event as -o json prints it.
type eventLine struct {
	Seq  uint64         `json:"seq"`
	What string         `json:"event"`
	Data runs.EventData `json:"data"`
}

// show prints ev; an event -o json cannot print is an error.
func (v *liveView) show(ev runs.Event) error {
	if v.json {
		b, err := json.Marshal(eventLine{Seq: ev.Seq, What: ev.What, Data: ev.Data})
		if err != nil {
			return fmt.Errorf("event %d (%s): %w", ev.Seq, ev.What, err)
		}
		fmt.Fprintln(v.w, string(b))
		return nil
	}
	var detail struct {
		Model       string          `json:"model"`
		Arguments   json.RawMessage `json:"arguments"`
		Status      string          `json:"status"`
		Output      json.RawMessage `json:"output"`
		CalledAt    time.Time       `json:"calledAt"`
		FinishedAt  *time.Time      `json:"finishedAt"`
		Error       *struct{ Code, Message string }
		Decision    string `json:"decision"`
		By          string `json:"by"`
		Reason      string `json:"reason"`
		Termination string `json:"termination"`
		Answer      string `json:"answer"`
		Text        string `json:"text"`
		Message     string `json:"message"`
		Action      string `json:"action"`
	}
	_ = json.Unmarshal(ev.Data.Detail, &detail) // a detail of another shape: the line shows what it has
	d := ev.Data
	at := d.At
	var line string
	switch ev.What {
	case "started":
		line = "run started, model " + detail.Model
		if !v.created.IsZero() && v.created.Before(at) {
			at = v.created
		}
	case "step_started":
		line = fmt.Sprintf("step %d: asking the model", d.Step)
	case "model_answered":
		line = fmt.Sprintf("step %d: the model answered", d.Step)
		if detail.Text != "" {
			line += ": " + short(detail.Text, 80)
		}
	case "tool_called":
		line = fmt.Sprintf("  → %s %s  (call %s)", d.Tool, short(string(detail.Arguments), 60), d.CallID)
	case "tool_started":
		line = fmt.Sprintf("  … %s running on %s", d.Tool, d.Executor)
	case "tool_result":
		line = fmt.Sprintf("  ✓ %s %s in %s: %s", d.Tool, detail.Status, took(detail.CalledAt, detail.FinishedAt), short(string(detail.Output), 60))
	case "tool_error":
		msg := detail.Status
		if detail.Error != nil {
			msg = detail.Error.Code + ": " + detail.Error.Message
		}
		line = fmt.Sprintf("  ✗ %s %s", d.Tool, short(msg, 80))
	case "approval_needed":
		line = fmt.Sprintf("  ? %s waits for an approval: toolfleet approvals approve %s (or deny)", d.Tool, d.CallID)
	case "approval_answered":
		what := d.Tool
		if what == "" {
			what = "call " + d.CallID
		}
		line = fmt.Sprintf("  ! %s: %s by %s", what, detail.Decision, detail.By)
		if detail.Reason != "" {
			line += ": " + detail.Reason
		}
	case "loop_detected":
		line = fmt.Sprintf("  ! loop: %s (%s)", detail.Message, detail.Action)
	case "done":
		line = "done: " + detail.Termination
	default: // text_delta, tool_call_started, tool_progress: the details above say it
		return nil
	}
	fmt.Fprintf(v.w, "%s %s\n", at.Local().Format("15:04:05.000"), line)
	return nil
}
