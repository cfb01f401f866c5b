package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// StartRequest asks for a run. It is the body of POST /v1/runs.
type StartRequest struct {
	// Messages is the conversation to continue; Input is a shorthand for one user message.
	Messages []provider.Message `json:"messages,omitempty"`
	Input    string             `json:"input,omitempty"`
	System   string             `json:"system,omitempty"`
	// Model names one of the planner's models; empty: the default model.
	Model string `json:"model,omitempty"`
	// Tools is the run's tool set, by name; empty: the whole catalog, as it is at each step.
	Tools []string `json:"tools,omitempty"`
	// ActiveTools narrows the tool set further (e.g. a UI's toggles); names must be in it.
	ActiveTools []string `json:"activeTools,omitempty"`
	// ToolChoice is auto (default), required, none, or the name of one tool.
	ToolChoice string `json:"toolChoice,omitempty"`
	Limits     Limits `json:"limits,omitempty"`
	// Pick asks the picker for candidates at each step even when the tool set is small;
	// false never asks; absent asks when the set is larger than the planner's threshold.
	Pick     *bool             `json:"pick,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// StopWhen ends the run when a call matches one of its conditions; StopHook is a
	// NATS service asked after each step whether the run goes on (see stop.go).
	StopWhen []StopCondition `json:"stopWhen,omitempty"`
	StopHook *StopHook       `json:"stopHook,omitempty"`
	// PolicyHook is a NATS service asked before each call of the run goes to the fleet
	// whether it may: allow, deny, or modify its arguments (see policy.go). Nested runs
	// inherit it.
	PolicyHook *PolicyHook `json:"policyHook,omitempty"`
	// Parallel false runs a step's calls one after another, in the model's order (each
	// is published when the one before has its result); absent or true: all at once.
	Parallel *bool `json:"parallel,omitempty"`
	// Pause makes the run pause after every step, or after a step that called one of
	// the named tools, until it is resumed (pause.go).
	Pause *PauseOptions `json:"pause,omitempty"`
	// Caller is who starts the run: the run acts with this identity (see Run.Tenant). The
	// HTTP API sets it from the request's bearer token; it is never read from a body.
	Caller events.Identity `json:"-"`

	// forkedFrom is set by [Planner.Fork] (fork.go).
	forkedFrom *runrec.ForkPoint
}

// Start validates req, stores a new run and asks for its first step. It returns at once;
// follow the run with Get, Wait or the run's events. A planner saturated by a server
// that falls behind refuses the run with a 429 [APIError] before storing anything of it
// (see Backpressure in the package doc): ask again after its RetryAfter.
func (p *Planner) Start(ctx context.Context, req StartRequest) (*Run, error) {
	release, err := p.admit.admit()
	if err != nil {
		return nil, err
	}
	defer release()
	return p.start(ctx, req, newRunID(), nil, "")
}

func (p *Planner) start(ctx context.Context, req StartRequest, id string, parent *Run, parentCall string) (*Run, error) {
	run, err := p.newRun(req, id)
	if err != nil {
		return nil, err
	}
	if parent != nil {
		run.ParentID, run.ParentCallID, run.Depth = parent.ID, parentCall, parent.Depth+1
		// What narrowed the parent narrows its sub-agent (auth.go).
		run.Actors = slices.Clone(parent.Actors)
		if !parent.Deadline.IsZero() && (run.Deadline.IsZero() || run.Deadline.After(parent.Deadline)) {
			run.Deadline = parent.Deadline // a nested run ends by its parent's time
		}
		if h := parent.PolicyHook; h != nil {
			hook := *h
			run.PolicyHook = &hook // a nested run is held to its parent's policy
		}
	}
	run.Sequential = req.Parallel != nil && !*req.Parallel
	p.startRunSpan(ctx, run, parent)
	// A replica that serves steps takes the run's first step itself, leased to it in the
	// control state the create stores (see local.go); one that does not asks the plan
	// stream for it.
	serving := p.local.serving()
	if serving {
		run.Lease = p.newLease(0)
	}
	// The input goes to the run log (once: a second start of the same nested run finds
	// it there) and the control state, which makes the run exist, to the bucket; both
	// are stored before the run is announced and Start returns. A new top-level run's
	// first step is taken meanwhile (firststep.go); a nested run's once it is stored.
	waitInput, err := p.rlog.WriteInput(ctx, run.ID, run.Messages)
	if err != nil {
		p.runSpans.Delete(run.ID)
		if runstore.IsPermanent(err) {
			return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the run's input cannot be stored: %v", err)}
		}
		return nil, err
	}
	var first *createGate
	if serving && parent == nil {
		first = newCreateGate()
		p.rlog.KeepInput(run.ID, run.Messages)
		if !p.takeFirstStep(run.Clone(), first) {
			first = nil
		}
	}
	rev, err := p.runs.Create(ctx, run)
	if err != nil {
		if first != nil {
			first.failed(err)
		}
		p.runSpans.Delete(run.ID)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, errRunExists
		}
		return nil, err
	}
	if err := waitInput(ctx); err != nil {
		if first != nil {
			first.failed(err)
		}
		// The run exists without its input: it cannot take a step. End it, saying why.
		_ = p.failRun(context.WithoutCancel(ctx), run.ID, err)
		return nil, err
	}
	p.m.runStarted()
	started := map[string]any{"model": run.Model, "tools": run.Tools, "parent": run.ParentID}
	if run.ForkedFrom != nil {
		started["forkedFrom"] = run.ForkedFrom
	}
	p.emit(ctx, run, "started", 0, "", started)
	if first != nil {
		first.stored(rev, func(m *nats.Msg) { p.publishHeld(ctx, m) })
		return run, nil
	}
	if !serving || !p.takeLeased(run.ID, 0) {
		// Not served here (or no longer): the plan stream has it, and if this publish
		// fails, the sweepers publish it when the lease runs out.
		if err := p.publishAdvance(ctx, run.ID, 0); err != nil {
			return nil, err
		}
	}
	return run, nil
}

var errRunExists = errors.New("run exists")

func isRunExists(err error) bool { return errors.Is(err, errRunExists) }

// newRun checks a request and builds the run it asks for.
func (p *Planner) newRun(req StartRequest, id string) (*Run, error) {
	msgs := slices.Clone(req.Messages)
	if strings.TrimSpace(req.Input) != "" {
		msgs = append(msgs, provider.Message{Role: provider.RoleUser, Text: req.Input})
	}
	if len(msgs) == 0 {
		return nil, requestErrorf("give the run an input or messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case provider.RoleUser, provider.RoleAssistant, provider.RoleTool:
		default:
			return nil, requestErrorf("messages[%d].role must be user, assistant or tool, got %q", i, m.Role)
		}
	}
	model := req.Model
	if model == "" {
		model = p.cfg.DefaultModel
	}
	if _, ok := p.cfg.Models[model]; !ok {
		return nil, requestErrorf("unknown model %q; configured: %s", model, strings.Join(p.modelNames(), ", "))
	}
	if roles, ok := p.cfg.ModelRoles[model]; ok && !slices.Contains(roles, req.Caller.Role) {
		return nil, forbiddenf("model %q may not be used by role %q (allowed roles: %s)", model, req.Caller.Role, strings.Join(roles, ", "))
	}
	if err := req.Limits.Validate(); err != nil {
		return nil, requestErrorf("%v", err)
	}
	limits := req.Limits.WithDefaults()
	if limits.CostBudget > 0 && !p.cfg.Prices.Priced(model) {
		return nil, requestErrorf("limits.costBudget needs a price for model %q, and the planner's price table has none", model)
	}
	if err := validateStop(req.StopWhen, req.StopHook); err != nil {
		return nil, requestErrorf("%v", err)
	}
	if err := validatePolicy(req.PolicyHook); err != nil {
		return nil, requestErrorf("%v", err)
	}
	if err := req.Pause.Validate(); err != nil {
		return nil, requestErrorf("%v", err)
	}

	if err := req.Caller.Validate(); err != nil {
		return nil, requestErrorf("%v", err)
	}
	toolSet := req.Tools
	for _, n := range req.Tools {
		if err := p.checkNamed(n, req.Caller, "tools"); err != nil {
			return nil, err
		}
	}
	if len(req.ActiveTools) > 0 {
		for _, n := range req.ActiveTools {
			if err := p.checkNamed(n, req.Caller, "activeTools"); err != nil {
				return nil, err
			}
			if len(req.Tools) > 0 && !slices.Contains(req.Tools, n) {
				return nil, requestErrorf("unknown tool %q in activeTools: it is not among the run's tools", n)
			}
		}
		toolSet = req.ActiveTools
	}
	if toolSet != nil {
		toolSet = slices.Compact(slices.Sorted(slices.Values(toolSet)))
	}
	choice, err := provider.ParseToolChoice(req.ToolChoice)
	if err != nil {
		return nil, requestErrorf("bad toolChoice: %v", err)
	}
	if choice.Tool != "" && toolSet != nil && !slices.Contains(toolSet, choice.Tool) {
		return nil, requestErrorf("toolChoice names %q, which is not in the run's tools", choice.Tool)
	}
	if choice.Tool != "" {
		if err := p.checkNamed(choice.Tool, req.Caller, "toolChoice"); err != nil {
			return nil, err
		}
	}
	now := p.cfg.Now()
	pick := req.Pick != nil && *req.Pick
	return &Run{ID: id, Status: StatusRunning, Model: model, System: req.System, Tools: toolSet,
		ToolChoice: choice, Limits: limits, Pick: pick, Metadata: req.Metadata, Messages: msgs,
		Tenant: req.Caller.Tenant, Role: req.Caller.Role, StopWhen: req.StopWhen, StopHook: req.StopHook,
		PolicyHook: req.PolicyHook, CreatedAt: now, Deadline: now.Add(limits.Timeout.D()),
		InputPreview: runrec.InputPreview(msgs), PauseOn: pauseOn(req.Pause), ForkedFrom: req.forkedFrom}, nil
}

// pauseOn is the run's pause options as a start gives them (nil: none).
func pauseOn(o *PauseOptions) *PauseOptions {
	if o.Empty() {
		return nil
	}
	return o.Clone()
}

func (p *Planner) modelNames() []string {
	out := make([]string, 0, len(p.cfg.Models))
	for n := range p.cfg.Models {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// View is run as the API shows it now: a run whose calls in flight wait on nested
// runs that wait on a person is shown awaiting approval, as lists show it (the run
// index knows the nested runs).
func (p *Planner) View(run *Run) RunView {
	return run.ViewWith(p.cfg.Now(), p.index.nestedWaitNow(run.Tenant))
}

// Get returns a run, assembled from its control state, its run log and its calls'
// results.
func (p *Planner) Get(ctx context.Context, id string) (*Run, error) {
	run, _, err := p.runs.Get(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) {
		return nil, notFoundf("no run %q", id)
	}
	if err != nil {
		return nil, err
	}
	return p.rlog.Assemble(ctx, run)
}

// Wait returns the run once it is done or paused, or when ctx ends (with the run as it
// is then).
func (p *Planner) Wait(ctx context.Context, id string) (*Run, error) {
	w, err := jsutil.Watch(ctx, p.runs.KV(), id)
	if err != nil {
		return nil, fmt.Errorf("watch run %s: %w", id, err)
	}
	defer w.Stop()
	var last *Run
	for {
		select {
		case <-ctx.Done():
			if last == nil {
				return p.Get(context.WithoutCancel(ctx), id)
			}
			if full, err := p.rlog.Assemble(context.WithoutCancel(ctx), last); err == nil {
				last = full
			}
			return last, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return p.Get(context.WithoutCancel(ctx), id)
			}
			if e == nil {
				if last != nil {
					continue
				}
				// "No initial values" is not proof there is no run: the watch's consumer
				// can count nothing pending once it has already sent the run's value
				// (a run changing while the watch starts), so that value comes after the
				// marker. The bucket answers.
				r, err := p.Get(ctx, id)
				if err != nil || settled(r.Status) {
					return r, err
				}
				continue
			}
			var r Run
			if json.Unmarshal(e.Value(), &r) != nil {
				continue
			}
			last = &r
			if settled(r.Status) {
				return p.rlog.Assemble(ctx, last)
			}
		}
	}
}

// stepTools returns the definitions the model is shown at this step, and their record
// for the run: the run's tools as the catalog has them now, narrowed by the picker when
// the set is large. A tool named by toolChoice stays in the set.
func (p *Planner) stepTools(ctx context.Context, r *Run, msgs []provider.Message) ([]tools.Definition, StepTools, error) {
	names := available(r, p.cat.names())              // without the tools disabled for the run
	rec := StepTools{Step: r.Step, Tools: []string{}} // none offered is [], as the API's schema says
	if p.cfg.Picker != nil && (r.Pick || len(names) > p.cfg.PickThreshold) {
		picked, err := p.cfg.Picker.Pick(ctx, PickQuery{Input: lastUserText(msgs), Tools: r.Tools,
			AllowUnsafe: r.Tools != nil, Role: r.Role, Tenant: r.Tenant, Max: p.cfg.PickMax})
		if err != nil {
			p.log.Warn().Err(err).Str("run_id", r.ID).Msg("picker failed; showing the model every tool of the run")
		} else {
			var keep []string
			for _, res := range picked {
				if slices.Contains(names, res.Name) {
					keep = append(keep, res.Name)
					res.Definition = tools.Definition{} // the catalog has it; the run keeps the pick
					rec.Picked = append(rec.Picked, res)
				}
			}
			if n := r.ToolChoice.Tool; n != "" && len(keep) > 0 && !slices.Contains(keep, n) && slices.Contains(names, n) {
				keep = append(keep, n)
			}
			if len(keep) > 0 {
				names = keep
			} else {
				rec.Picked = nil
			}
		}
	}
	var defs []tools.Definition
	for _, n := range names {
		if n == AgentToolName {
			if r.Depth < r.Limits.MaxDepth {
				defs = append(defs, AgentDefinition())
				rec.Tools = append(rec.Tools, n)
			}
			continue
		}
		if d, ok := p.cat.get(n); ok && allowsTool(r, d) {
			defs = append(defs, d)
			rec.Tools = append(rec.Tools, n)
		}
	}
	return defs, rec, nil
}

func lastUserText(msgs []provider.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser && msgs[i].Text != "" {
			return msgs[i].Text
		}
	}
	return ""
}
