package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// AgentToolName is the planner's own tool: it starts a child run on a task with a scoped
// tool set, and its result is the child's answer. A run offers it when its tool set names
// it; the depth of nesting is bounded by Limits.MaxDepth.
const AgentToolName = runrec.AgentToolName

// agentSchema is the arguments of run_agent.
const agentSchema = `{
  "type": "object",
  "properties": {
    "task": {"type": "string", "minLength": 1, "description": "What the sub-agent must do, in full: it sees nothing else of this conversation."},
    "tools": {"type": "array", "items": {"type": "string"}, "description": "Tools the sub-agent may use; a subset of this run's tools. Empty: all of them."},
    "model": {"type": "string", "description": "Model of the sub-agent; default this run's model."}
  },
  "required": ["task"],
  "additionalProperties": false
}`

// AgentDefinition is the definition of run_agent shown to models.
func AgentDefinition() tools.Definition {
	return tools.Definition{Type: "function", Name: AgentToolName,
		Description: "Start a sub-agent on a self-contained task with a subset of the tools; returns its final answer.",
		Parameters:  json.RawMessage(agentSchema), Safe: true}
}

type agentArgs struct {
	Task  string   `json:"task"`
	Tools []string `json:"tools"`
	Model string   `json:"model"`
}

var agentRegistry = func() *tools.Registry {
	r := tools.NewRegistry()
	if err := r.AddFunc(AgentDefinition(), runsOnTheFleet); err != nil {
		panic(err)
	}
	return r
}()

// checkAgentCall validates a run_agent call: its arguments, the depth limit, that the
// run's tree has some of each budget left for the child to draw from, and that the
// child's tools are within the parent's.
func (p *Planner) checkAgentCall(r *Run, c *CallRecord) *tools.Error {
	call, err := agentRegistry.Hydrate(AgentToolName, c.Arguments)
	if err != nil {
		return tools.AsError(err, tools.CodeInvalidInput)
	}
	c.Arguments = call.Arguments()
	if r.Depth+1 > r.Limits.MaxDepth {
		return tools.Errorf(tools.CodeDenied, "nested runs are limited to a depth of %d; this run is at depth %d", r.Limits.MaxDepth, r.Depth)
	}
	if err := budget.NoBudgetForChild(r); err != nil {
		return err
	}
	var a agentArgs
	if err := json.Unmarshal(c.Arguments, &a); err != nil {
		return tools.Wrap(tools.CodeInvalidInput, err, "run_agent arguments")
	}
	for _, t := range a.Tools {
		if !allows(r, t) {
			return tools.Errorf(tools.CodeInvalidInput, "tool %q is not available to this run, so not to its sub-agent", t)
		}
	}
	if a.Model != "" {
		if _, ok := p.cfg.Models[a.Model]; !ok {
			return tools.Errorf(tools.CodeInvalidInput, "model %q is not configured", a.Model)
		}
	}
	return nil
}

// childID is the id of the run started by a run_agent call: derived from the call so that
// starting it twice (a resumed step) finds the same run.
func childID(call string) string { return "c" + strings.ReplaceAll(call, "-", "_") }

// startChild starts the nested run of a run_agent call, once.
func (p *Planner) startChild(ctx context.Context, parent *Run, c *CallRecord) error {
	var a agentArgs
	if err := json.Unmarshal(c.Arguments, &a); err != nil {
		return err
	}
	scoped := a.Tools
	if len(scoped) == 0 {
		scoped = available(parent, p.cat.names())
	}
	// run_agent stays in the child's set when the parent's has it: the child is offered it
	// only below the depth limit (stepTools), and a call of it at the limit is answered
	// with the limit, so the model learns why.
	model := a.Model
	if model == "" {
		model = parent.Model
	}
	req := StartRequest{
		Messages: []provider.Message{{Role: provider.RoleUser, Text: a.Task}},
		// The child draws from what the parent has left (package budget).
		Model: model, Tools: scoped, Limits: budget.ChildLimits(parent, p.cfg.Now()), Metadata: parent.Metadata,
		Caller: parent.Caller(), // a nested run acts for the same caller
	}
	if parent.Sequential {
		req.Parallel = new(false)
	}
	_, err := p.start(ctx, req, childID(c.ID), parent, c.ID)
	if err != nil && !isRunExists(err) {
		return fmt.Errorf("start nested run for call %s: %w", c.ID, err)
	}
	return nil
}

// answerParent publishes a finished nested run's outcome as the result of the parent's
// run_agent call; the parent consumes it like any tool result. A nested run that ended
// for a budget answers with that budget's code (cost_budget, token_budget, max_steps),
// which the parent does not count as a failed call (recordResult): its tree has spent
// that budget, and the parent ends by it at its next step, as for a run_agent call
// refused for it.
func (p *Planner) answerParent(ctx context.Context, child *Run) error {
	res := events.Result{Tool: AgentToolName, CallID: child.ParentCallID, RunID: child.ParentID,
		Executor: p.cfg.ID, Validated: true, Attempts: 1, StartedAt: child.CreatedAt, Caller: child.Caller()}
	if child.FinishedAt != nil {
		res.FinishedAt = *child.FinishedAt
		res.DurationMS = child.FinishedAt.Sub(child.CreatedAt).Milliseconds()
	}
	out := map[string]any{"runId": child.ID, "termination": child.Termination, "answer": child.Answer}
	switch child.Termination {
	case TerminationCompleted, TerminationFinalTool:
		res.Status = events.StatusOK
	default:
		res.Status = events.StatusError
		code, ok := budget.End(child.Termination)
		if !ok {
			code = tools.CodeToolFailed
		}
		res.Error = tools.Errorf(code, "the sub-agent stopped without an answer: %s (%s)", child.Termination, child.Detail)
		out["error"] = res.Error
	}
	res.Output = jsonText(out)
	msg, err := events.NewResult(p.cfg.Source, res, 1)
	if err != nil {
		return err
	}
	msg.Subject = p.cfg.Events.ResultPublishSubject(msg.Subject)
	// A result that is already stored (a replayed step) answered the parent already.
	if _, err := jsutil.PublishSettled(ctx, p.js, msg); err != nil && !jsutil.IsAlreadyAnswered(err) {
		return fmt.Errorf("answer parent run %s: %w", child.ParentID, err)
	}
	return nil
}
