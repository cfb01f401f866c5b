package planner

import (
	"context"
	"strings"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
)

// The run events the planner publishes, on toolfleet.event.run.<run>.<what>[.<tenant>]
// (see doc.go for the table). Each carries the run id, the step, the call id where one
// applies, and when it happened (the CloudEvent time, and "at" in the data).
const (
	eventStarted       = "started"
	eventStepStarted   = "step_started"
	eventModelAnswered = "model_answered"
	eventLoopDetected  = "loop_detected"
	eventToolError     = "tool_error"
)

// maxEventText bounds the model's text in a model_answered event: the whole answer is
// in the run's conversation (GET /v1/runs/{id}/messages) and, at the end, in done.
const maxEventText = 16 << 10

// stepStarted announces that the planner asks the model for step of run.
func (p *Planner) stepStarted(ctx context.Context, run *Run, step int) {
	p.emit(ctx, run, eventStepStarted, step, "", map[string]any{"model": run.Model})
}

// modelAnswered announces the model's answer at step (msg) and what the planner made of
// it at once: model_answered with the calls it asked for and the usage (the step's and
// the run's so far), then for every call the planner answered itself — invalid
// arguments, an unknown tool, a tool not allowed, a repeated call, the depth limit —
// its tool_error, and loop_detected for a repeated call. state is the control state the
// step leaves, calls and warnings the step's as recorded (calls with the planner's own
// answers), and before the usage before the step.
func (p *Planner) modelAnswered(ctx context.Context, state *Run, step int, msg provider.Message, calls []*CallRecord, warnings []string, before provider.Usage) {
	type call struct {
		CallID      string `json:"callId"`
		ModelCallID string `json:"modelCallId"`
		Tool        string `json:"tool"`
	}
	made := make([]call, 0, len(calls))
	for _, c := range calls {
		made = append(made, call{CallID: c.ID, ModelCallID: c.ModelCallID, Tool: c.Name})
	}
	text, cut := msg.Text, false
	if len(text) > maxEventText {
		text, cut = strings.ToValidUTF8(text[:maxEventText], ""), true
	}
	stepUsage := provider.Usage{InputTokens: state.Usage.InputTokens - before.InputTokens,
		OutputTokens: state.Usage.OutputTokens - before.OutputTokens}
	detail := map[string]any{"toolCalls": made, "usage": stepUsage, "runUsage": state.Usage,
		"tokens": state.Usage.Total(), "cost": state.Cost, "text": text}
	if cut {
		detail["textTruncated"] = true
	}
	p.emit(ctx, state, eventModelAnswered, step, "", detail)
	for _, c := range calls {
		if !c.Local || !c.Done() {
			continue
		}
		if c.Error != nil && c.Error.Code == codeLoopDetected {
			p.emit(ctx, state, eventLoopDetected, step, c.ID, map[string]any{
				"tool": c.Name, "action": state.Limits.LoopAction, "message": c.Error.Message})
		}
		p.emit(ctx, state, eventToolError, step, c.ID, p.eventCall(c))
	}
	if state.Limits.LoopAction == runrec.LoopWarn {
		// A warned loop runs the call: the warning is the step's, and names the tool
		// ("<tool> was called N times in a row ...", step.go).
		for _, w := range warnings {
			if !strings.HasSuffix(w, "times in a row with the same arguments") {
				continue
			}
			data := map[string]any{"action": runrec.LoopWarn, "message": w}
			callID := ""
			for _, c := range calls {
				if strings.HasPrefix(w, c.Name+" was called ") {
					data["tool"], callID = c.Name, c.ID
				}
			}
			p.emit(ctx, state, eventLoopDetected, step, callID, data)
			break
		}
	}
}
