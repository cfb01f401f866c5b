package planner

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Who may do what with a run. One rule, the same over HTTP, MCP and NATS:
//
//   - A run's owner is the identity that started it (Run.Tenant, Run.Role); its calls
//     are published with that identity, and executors enforce tools' roles with it.
//   - Seeing a run (get, messages, events, wait) is for callers of its tenant; for
//     anyone else the run does not exist (404).
//   - Acting on a run (follow-up, tools change, pause, resume, cancel, approval answers)
//     is for the owner's role, and for the operator roles (Config.OperatorRoles), within
//     the tenant; another role of the tenant is refused (403). The decision is
//     events.MayAct, which the executors apply too to an approval answer or a cancel of a
//     call that reaches them over NATS: give the planner and the executors of a fleet the
//     same operator roles.
//   - The record of an act names the caller (DescribeCaller), never a by the request
//     wrote: an approval keeps that as its ClaimedBy.
//   - No action widens what runs beyond what the acting caller may call itself: a tool
//     is enabled only for a caller who may call it; an approval is answered only by a
//     caller who may call the tool; and once a caller other than the owner has acted
//     (a follow-up, a tools change), the run is offered and allowed only the tools that
//     the owner and every such caller may call (Run.Actors), for the rest of the run and
//     in its nested runs.

// visibleTo reports whether a caller of identity id may see run: runs of its own tenant
// (anonymous callers: anonymous runs).
func visibleTo(r *Run, id events.Identity) bool { return r.Tenant == id.Tenant }

// GetFor is [Planner.Get] for caller: a run it may not see is not found (404), as if it
// did not exist.
func (p *Planner) GetFor(ctx context.Context, id string, caller events.Identity) (*Run, error) {
	run, err := p.Get(ctx, id)
	if err == nil && !visibleTo(run, caller) {
		return nil, notFoundf("no run %q", id)
	}
	return run, err
}

// CallVisible says, as a 404, that caller sees no call callID: the id names no run, or a
// run caller may not see (nil when it sees the run; whether the call is one of the run's
// is [Planner.Approve]'s to say). Other errors (NATS not answering) are returned as they
// are.
func (p *Planner) CallVisible(ctx context.Context, callID string, caller events.Identity) error {
	runID, ok := runOfCall(callID)
	if !ok {
		return notFoundf("no call %q", callID)
	}
	if _, err := p.GetFor(ctx, runID, caller); err != nil {
		if errors.As(err, new(*APIError)) {
			err = notFoundf("no call %q", callID)
		}
		return err
	}
	return nil
}

// mayAct says, as an API error, why caller may not act on run (follow up, change its
// tools, cancel it, answer its approvals): not found outside the run's tenant, forbidden
// for a role that is neither the owner's nor an operator role.
func (p *Planner) mayAct(r *Run, caller events.Identity, what string) error {
	return p.refusal(events.MayAct(events.Act{Actor: caller, Owner: r.Caller(), What: what, Kind: "run", ID: r.ID},
		p.cfg.OperatorRoles, nil))
}

// refusal is why, as an API error: 404 for a run or call the caller may not see, 403
// otherwise; nil for nil.
func (p *Planner) refusal(why *events.Refusal) error {
	switch {
	case why == nil:
		return nil
	case why.Hidden:
		return notFoundf("%s", why.Message)
	}
	return forbiddenf("%s", why.Message)
}

// acted records on r that caller acted on it: a caller other than the owner joins
// r.Actors, which narrows the tools the run may call to those every actor may call.
func acted(r *Run, caller events.Identity) {
	// A zero identity on a tenant's run is a record written before records named their
	// caller: no anonymous caller can reach a tenant's run.
	if caller == r.Caller() || caller.IsZero() || slices.Contains(r.Actors, caller) {
		return
	}
	r.Actors = append(r.Actors, caller)
}

// allowsTool reports whether the run may call the tool of definition d: its owner and
// every caller who acted on it may call it.
func allowsTool(r *Run, d tools.Definition) bool {
	if !d.AllowsCaller(r.Tenant, r.Role) {
		return false
	}
	for _, a := range r.Actors {
		if !d.AllowsCaller(a.Tenant, a.Role) {
			return false
		}
	}
	return true
}

// describeIdentity names the identity run acts with, for messages.
func describeIdentity(r *Run) string {
	if r.Tenant == "" {
		return "an anonymous caller"
	}
	return "role " + r.Role + " of tenant " + r.Tenant
}

// refuseTool says, as an API error, why caller may not have a run call the tool of
// definition d (nil when it may). A tool of other tenants only does not exist for the
// caller (400 unknown, as if no executor served it: a tenant learns nothing of another's
// tools); a tool the caller's tenant has but its role may not call is named as such
// (403), so that a caller learns its role is the reason, not a missing executor.
func refuseTool(d tools.Definition, caller events.Identity, where string) error {
	if d.AllowsCaller(caller.Tenant, caller.Role) {
		return nil
	}
	if len(d.Tenants) > 0 && !slices.Contains(d.Tenants, caller.Tenant) {
		return requestErrorf("unknown tool %q in %s: no executor serves it", d.Name, where)
	}
	who := "an anonymous caller"
	if !caller.IsZero() {
		who = "role " + caller.Role
	}
	return forbiddenf("tool %q in %s may not be called by %s (allowed roles: %s)", d.Name, where, who, strings.Join(d.Roles, ", "))
}

// checkNamed says, as an API error, why caller may not name the tool name in where (a
// run's tools, activeTools, toolChoice, a tools change): unknown, or not the caller's.
func (p *Planner) checkNamed(name string, caller events.Identity, where string) error {
	if name == AgentToolName {
		return nil
	}
	d, ok := p.cat.get(name)
	if !ok {
		return requestErrorf("unknown tool %q in %s: no executor serves it", name, where)
	}
	return refuseTool(d, caller, where)
}
