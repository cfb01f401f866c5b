package planner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// checkTools says, as an API error, what is wrong with caller's change of the run's
// tools: enabling a tool needs a caller who may call it, and a run whose owner may.
func (p *Planner) checkTools(r *Run, caller events.Identity, c *ToolsChange) error {
	if c == nil {
		return nil
	}
	for _, n := range c.Disable {
		if slices.Contains(c.Enable, n) {
			return requestErrorf("tool %q is both enabled and disabled", n)
		}
		if !allows(r, n) && n != AgentToolName {
			if _, ok := p.cat.get(n); !ok || r.Tools != nil {
				return requestErrorf("unknown tool %q in disable: it is not among the run's tools", n)
			}
		}
		if r.ToolChoice.Tool == n {
			return requestErrorf("tool %q cannot be disabled: the run's toolChoice names it", n)
		}
	}
	for _, n := range c.Enable {
		if n == AgentToolName && allows(r, n) {
			continue
		}
		if err := p.checkNamed(n, caller, "enable"); err != nil {
			return err
		}
		if d, _ := p.cat.get(n); !allowsTool(r, d) {
			return forbiddenf("cannot enable %q: run %s acts as %s, which may not call it", n, r.ID, describeIdentity(r))
		}
	}
	return nil
}

// applyTools changes the run's tools (checked with checkTools).
func applyTools(r *Run, c *ToolsChange) {
	if c == nil {
		return
	}
	disabled := slices.Clone(r.Disabled)
	for _, n := range c.Enable {
		disabled = slices.DeleteFunc(disabled, func(d string) bool { return d == n })
		if r.Tools != nil && !slices.Contains(r.Tools, n) {
			r.Tools = slices.Sorted(slices.Values(append(slices.Clone(r.Tools), n)))
		}
	}
	for _, n := range c.Disable {
		if !slices.Contains(disabled, n) {
			disabled = append(disabled, n)
		}
	}
	slices.Sort(disabled)
	r.Disabled = disabled
}

// available returns the tools the run may be offered, given the catalog's names: its
// tool set without the disabled ones.
func available(r *Run, catalog []string) []string {
	names := toolNames(r, catalog)
	if len(r.Disabled) == 0 {
		return names
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(r.Disabled, n) })
}

// ChangeTools enables and disables tools of the run id for its next steps, acting for
// caller, and adds the change's reminder (if any) for the model's next step. A running
// run is changed for its next model call; a run that ended keeps the change for its
// continuation (a canceled or storage_error run is refused, 409). The change is recorded
// on the run (Disabled, Tools; each step's Offered shows what the model was offered).
func (p *Planner) ChangeTools(ctx context.Context, id string, caller events.Identity, c ToolsChange) (*Run, error) {
	if c.Empty() && strings.TrimSpace(c.Reminder) == "" {
		return nil, requestErrorf("give enable, disable or a reminder")
	}
	run, _, err := p.runs.Get(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) || err == nil && !visibleTo(run, caller) {
		return nil, notFoundf("no run %q", id)
	}
	if err != nil {
		return nil, err
	}
	if err := p.mayAct(run, caller, "change the tools of"); err != nil {
		return nil, err
	}
	if err := continuable(run, false); err != nil {
		return run, err
	}
	if err := p.checkTools(run, caller, &c); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.Reminder) != "" {
		rec := runstore.MessageRecord{Key: c.ID, Tools: &ToolsChange{Enable: c.Enable, Disable: c.Disable}, By: caller,
			Messages: []provider.Message{{Role: provider.RoleUser, Text: c.Reminder}}}
		run, _, err = p.inject(ctx, id, caller, rec, false)
		return run, err
	}
	return p.runs.Update(ctx, id, func(r *Run) (bool, error) {
		if err := continuable(r, false); err != nil {
			return false, err
		}
		before, tools, actors := slices.Clone(r.Disabled), slices.Clone(r.Tools), len(r.Actors)
		applyTools(r, &c)
		acted(r, caller)
		return !slices.Equal(before, r.Disabled) || !slices.Equal(tools, r.Tools) || len(r.Actors) != actors, nil
	})
}

// calledNext dates the next call of the current step of a run whose calls run one after
// another (parallel: false) from now, when the one before it has its result and it goes
// out (dispatchNext): its calledAt and duration are its own, not its wait behind the
// calls before it.
func calledNext(r *Run, now time.Time) {
	for _, c := range r.StepCalls() {
		if !c.Local && !c.Done() {
			c.CalledAt = now
			return
		}
	}
}

// dispatchNext publishes the next call of the current step of a run whose calls run one
// after another (parallel: false), once the one before has its result. It runs on every
// result of the run; a call published already goes out again with the same id, which
// JetStream drops.
func (p *Planner) dispatchNext(ctx context.Context, run *Run) error {
	if run.Status != StatusRunning || !run.Sequential || len(run.StepCalls()) == 0 || stepComplete(run) {
		return nil
	}
	return p.dispatch(ctx, run)
}
