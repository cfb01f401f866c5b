package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A composite is a caller like any other. A model's call of a composite tool (its
// definition names its sub-tools: tools.Definition.Composite) runs other tools, chosen
// by the model in its arguments ({"calls":[{"name","args"}]}), so before the call goes
// out each of those sub-calls is checked like a call of the model (checkSubCalls):
// against the run's tool set (toolSetRefusal: tools or activeTools, disabled tools, the
// tools offered at the step — but not toolChoice, which names the one tool the model
// itself calls: a composite named by toolChoice still runs only sub-calls of the run's
// tools), the roles of the run's owner and actors (allowsTool), the sub-tool's schema,
// and the run's policy hook (askPolicy, one request per sub-call, under the sub-call's
// own id). The first refusal refuses the whole composite call, with a message naming the
// sub-call, so that the model can call it again without that sub-call: a composite's
// output has no place for a sub-call that did not run, and running the rest would make
// the model guess which did. run_agent is refused inside a composite (a nested run is
// the planner's, not a fleet call), and composites nest at most maxCompositeDepth deep.
//
// The call's record lists its sub-calls (CallRecord.Subs) with their policy decisions,
// which are stored with the step's record, and follows them as the fleet answers: a
// sub-call that waits for an approval is listed and answered like a call of the run
// (approvallist.go, Planner.Approve), and its result settles it. When the composite
// call's own result comes, a sub-call still open settles from that result (subOutcome).

// maxCompositeDepth is how deep composites may nest in one call of a run: a composite's
// sub-call of a composite is checked too, and its own sub-calls, down to this depth.
const maxCompositeDepth = 4

// subCallSep separates a composite call's id from its sub-call's position.
const subCallSep = "-sub-"

// subCallArgs is one sub-call in a composite's arguments.
type subCallArgs struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// compositeArgs reads a composite's arguments, which hydration checked against the
// envelope.
func compositeArgs(args json.RawMessage) ([]subCallArgs, error) {
	var in struct {
		Calls []subCallArgs `json:"calls"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, fmt.Errorf("composite arguments: %w", err)
	}
	return in.Calls, nil
}

// subArgs returns the arguments of the sub-call at path in a composite's arguments.
func subArgs(args json.RawMessage, path []int) (json.RawMessage, error) {
	calls, err := compositeArgs(args)
	if err != nil {
		return nil, err
	}
	if path[0] >= len(calls) {
		return nil, fmt.Errorf("composite arguments have no sub-call %d", path[0]+1)
	}
	if len(path) == 1 {
		return calls[path[0]].Args, nil
	}
	return subArgs(calls[path[0]].Args, path[1:])
}

// setSubArgs returns a composite's arguments with those of the sub-call at path
// replaced by v.
func setSubArgs(args json.RawMessage, path []int, v json.RawMessage) (json.RawMessage, error) {
	calls, err := compositeArgs(args)
	if err != nil {
		return nil, err
	}
	if path[0] >= len(calls) {
		return nil, fmt.Errorf("composite arguments have no sub-call %d", path[0]+1)
	}
	if len(path) == 1 {
		calls[path[0]].Args = v
	} else if calls[path[0]].Args, err = setSubArgs(calls[path[0]].Args, path[1:], v); err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Calls []subCallArgs `json:"calls"`
	}{calls})
}

// subPath returns the position, level by level (from 0), of the sub-call id within the
// call callID; false when id is not one of its sub-calls.
func subPath(callID, id string) ([]int, bool) {
	rest, ok := strings.CutPrefix(id, callID)
	if !ok || rest == "" {
		return nil, false
	}
	var path []int
	for _, part := range strings.Split(rest, subCallSep)[1:] {
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 {
			return nil, false
		}
		path = append(path, n-1)
	}
	return path, len(path) > 0 && strings.HasPrefix(rest, subCallSep)
}

// pathLabel names a sub-call's position for people: "2", or "2.1" for the first
// sub-call of the second.
func pathLabel(path []int) string {
	parts := make([]string, len(path))
	for i, n := range path {
		parts[i] = strconv.Itoa(n + 1)
	}
	return strings.Join(parts, ".")
}

// topCallID is the id of the run's call that id is, or is a sub-call of.
func topCallID(id string) string {
	top, _, _ := strings.Cut(id, subCallSep)
	return top
}

// checkSubCalls checks the sub-calls in args of the composite d, called as id — the
// model's call of top, or a sub-call of it at path — like checkCall checks a call of the
// model, and returns their records, depth first, and whether all were validated against
// a schema; or the error that refuses the model's call of top, naming the sub-call.
func (p *Planner) checkSubCalls(r *Run, top, id string, path []int, d tools.Definition, args json.RawMessage) ([]*runrec.SubCall, bool, *tools.Error) {
	calls, err := compositeArgs(args)
	if err != nil {
		return nil, false, tools.Wrap(tools.CodeInvalidInput, err, fmt.Sprintf("%s was not run: %v", top, err))
	}
	if len(path) >= maxCompositeDepth {
		return nil, false, tools.Errorf(tools.CodeNotAllowed, "%s was not run: its sub-call %s (%s) nests composites more than %d deep; %s",
			top, pathLabel(path), d.Name, maxCompositeDepth, mayCall(r))
	}
	var subs []*runrec.SubCall
	validated := true
	for i, sc := range calls {
		at := append(slices.Clone(path), i)
		refused := func(why string, a ...any) *tools.Error {
			return tools.Errorf(tools.CodeNotAllowed, "%s was not run: its sub-call %s calls %q, %s; call %s without it (%s)",
				top, pathLabel(at), sc.Name, fmt.Sprintf(why, a...), top, mayCall(r))
		}
		if sc.Name == AgentToolName {
			return nil, false, refused("and a nested run cannot start inside a composite: call %s itself", AgentToolName)
		}
		if !d.Composite.Has(sc.Name) {
			pointer := argsPointer(at) + "/name"
			return nil, false, &tools.Error{Code: tools.CodeInvalidInput,
				Violations: []tools.Violation{{Pointer: pointer, Message: fmt.Sprintf("must be one of %v", d.Composite.Tools)}},
				Message: fmt.Sprintf("%s was not run: its sub-call %s calls %q, which is not one of %s's tools %v",
					top, pathLabel(at), sc.Name, d.Name, d.Composite.Tools)}
		}
		sd, ok := p.cat.get(sc.Name)
		if !ok {
			return nil, false, refused("which no executor serves")
		}
		if why := toolSetRefusal(r, sc.Name); why != "" {
			return nil, false, refused("and %s", why)
		}
		if !allowsTool(r, sd) {
			return nil, false, refused("which %s may not call", actingFor(r, sd))
		}
		call, err := p.cat.hydrate(sc.Name, sc.Args)
		if err != nil {
			te := tools.AsError(err, tools.CodeInvalidInput)
			out := *te
			out.Violations = make([]tools.Violation, len(te.Violations))
			for k, v := range te.Violations {
				out.Violations[k] = tools.Violation{Pointer: argsPointer(at) + "/args" + v.Pointer, Message: v.Message}
			}
			out.Message = fmt.Sprintf("%s was not run: its sub-call %s: %s", top, pathLabel(at), te.Message)
			return nil, false, &out
		}
		s := &runrec.SubCall{ID: events.SubCallID(id, i), Name: sc.Name, Validated: call.Validated(), Status: string(CallPending)}
		validated = validated && s.Validated
		subs = append(subs, s)
		if sd.Composite != nil {
			nested, v, te := p.checkSubCalls(r, top, s.ID, at, sd, call.Arguments())
			if te != nil {
				return nil, false, te
			}
			subs, validated = append(subs, nested...), validated && v
		}
	}
	return subs, validated, nil
}

// argsPointer is the JSON pointer, in the model's call of a composite, to the sub-call
// at path.
func argsPointer(path []int) string {
	var b strings.Builder
	for i, n := range path {
		if i > 0 {
			b.WriteString("/args")
		}
		fmt.Fprintf(&b, "/calls/%d", n)
	}
	return b.String()
}

// actingFor names who, of the identities the run acts for (its owner, then each caller
// who acted on it), may not call the tool of d.
func actingFor(r *Run, d tools.Definition) string {
	if !d.AllowsCaller(r.Tenant, r.Role) {
		return describeIdentity(r) + " (the run's owner)"
	}
	for _, a := range r.Actors {
		if !d.AllowsCaller(a.Tenant, a.Role) {
			return fmt.Sprintf("role %s of tenant %s (who acted on the run)", a.Role, a.Tenant)
		}
	}
	return "the run"
}

// policyItem is what the run's policy hook is asked about: a call of the model (sub
// nil), or a sub-call of one at path.
type policyItem struct {
	call *CallRecord
	sub  *runrec.SubCall
	path []int
}

// subItems are the policy items of c's sub-calls under id (c.ID: all of them).
func subItems(c *CallRecord, id string) []policyItem {
	var out []policyItem
	for _, s := range c.Subs {
		if !strings.HasPrefix(s.ID, id+subCallSep) {
			continue
		}
		if path, ok := subPath(c.ID, s.ID); ok {
			out = append(out, policyItem{call: c, sub: s, path: path})
		}
	}
	return out
}

// policyRequest is the request about it: a sub-call is asked about under its own id,
// tool and arguments, with its composite's tool and call id in the metadata (as the
// sub-call carries them to its executor).
func (it policyItem) policyRequest(r *Run) (events.PolicyRequest, error) {
	c := it.call
	req := events.PolicyRequest{Level: events.PolicyLevelRun, Tool: c.Name, CallID: c.ID, RunID: r.ID, Step: c.Step,
		Arguments: c.Arguments, Validated: c.Validated, Metadata: r.Metadata, Caller: r.Caller()}
	if it.sub == nil {
		return req, nil
	}
	args, err := subArgs(c.Arguments, it.path)
	if err != nil {
		return req, err
	}
	parentID := it.sub.ID[:strings.LastIndex(it.sub.ID, subCallSep)]
	parent := c.Name
	for _, s := range c.Subs {
		if s.ID == parentID {
			parent = s.Name
		}
	}
	meta := maps.Clone(r.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[events.MetaCompositeTool], meta[events.MetaCompositeCall] = parent, parentID
	req.Tool, req.CallID, req.Arguments, req.Validated, req.Metadata = it.sub.Name, it.sub.ID, args, it.sub.Validated, meta
	return req, nil
}

// applySubPolicy carries out the decision rec on the sub-call of it, which the hook's
// record joins: a deny refuses the composite call, naming the sub-call; a modification
// is checked against the sub-tool's schema (and, for a composite sub-tool, its own
// sub-calls against the run's rules) and replaces the sub-call's arguments within the
// composite's. It returns the items to ask about next: the sub-calls of a composite
// sub-call whose arguments were replaced.
func (p *Planner) applySubPolicy(r *Run, it policyItem, rec events.PolicyRecord, now time.Time) []policyItem {
	c, s := it.call, it.sub
	s.Policy = append(s.Policy, rec)
	log := p.log.With().Str("run_id", r.ID).Str("call_id", s.ID).Str("tool", s.Name).Str("hook", rec.Hook).
		Str("decision", string(rec.Decision)).Logger()
	by := "hook"
	if rec.Error != "" {
		by = "onError"
		log.Warn().Str("error", rec.Error).Msg("policy hook gave no usable answer about a sub-call; its onError applies")
	}
	p.m.policyDecision(string(rec.Decision), by)
	if c.Done() {
		return nil // refused already, by a decision on another of its sub-calls
	}
	refuse := func(te *tools.Error) {
		out := *te
		out.Message = fmt.Sprintf("%s was not run: its sub-call %s: %s; call %s without it", c.Name, pathLabel(it.path), te.Message, c.Name)
		c.AnswerLocal(string(events.StatusOf(&out)), &out, now)
		r.Errors++
	}
	switch rec.Decision {
	case events.PolicyDeny:
		refuse(rec.Denial(s.Name))
		log.Info().Str("reason", rec.Reason).Msg("policy hook denied a sub-call; its composite call is refused")
	case events.PolicyModify:
		call, err := p.cat.hydrate(s.Name, rec.ArgumentsModified)
		if err != nil {
			refuse(rec.InvalidModification(s.Name, err))
			log.Info().Err(err).Msg("policy hook modified a sub-call's arguments into invalid ones; its composite call is refused")
			return nil
		}
		args, err := setSubArgs(c.Arguments, it.path, call.Arguments())
		if err != nil {
			refuse(tools.Wrap(tools.CodeInternal, err, err.Error()))
			return nil
		}
		if c.ArgumentsOriginal == nil {
			c.ArgumentsOriginal = c.Arguments
		}
		c.Arguments = args
		log.Info().Str("reason", rec.Reason).Msg("policy hook modified a sub-call's arguments")
		if d := call.Definition(); d.Composite != nil {
			return p.recheckSubs(r, c, s.ID, it.path, d, call.Arguments(), rec, now)
		}
	}
	return nil
}

// recheckSubs checks again, after the policy hook replaced them (rec), the sub-calls
// under id (c.ID itself, or its composite sub-call at path) of the model's composite call
// c, whose arguments for them are args: the records under id are replaced, and their
// policy items returned to ask the hook about; a refusal refuses c.
func (p *Planner) recheckSubs(r *Run, c *CallRecord, id string, path []int, d tools.Definition, args json.RawMessage,
	rec events.PolicyRecord, now time.Time) []policyItem {
	subs, _, te := p.checkSubCalls(r, c.Name, id, path, d, args)
	if te != nil {
		out := rec.InvalidModification(c.Name, te)
		c.AnswerLocal(string(events.StatusOf(out)), out, now)
		r.Errors++
		return nil
	}
	under := func(s *runrec.SubCall) bool { return strings.HasPrefix(s.ID, id+subCallSep) }
	at := len(c.Subs)
	if i := slices.IndexFunc(c.Subs, under); i >= 0 {
		at = i
	} else if i := slices.IndexFunc(c.Subs, func(s *runrec.SubCall) bool { return s.ID == id }); i >= 0 {
		at = i + 1
	}
	c.Subs = slices.DeleteFunc(c.Subs, under)
	c.Subs = slices.Insert(c.Subs, min(at, len(c.Subs)), subs...)
	return subItems(c, id)
}

// subCall returns the sub-call id of a call of r and that call; nil when none is.
func subCall(r *Run, id string) (*CallRecord, *runrec.SubCall) {
	c := r.Call(topCallID(id))
	if c == nil {
		return nil, nil
	}
	for _, s := range c.Subs {
		if s.ID == id {
			return c, s
		}
	}
	return nil, nil
}

// subResult records on s, a sub-call of a call of the run, its result res: the
// sub-call's record settles; the composite call goes on until its own result.
func subResult(s *runrec.SubCall, res events.Result, now time.Time) bool {
	if s.Done() {
		return false
	}
	s.Status = string(res.Status)
	if a := res.Approval; a != nil {
		s.Approval = a
	}
	finished := res.FinishedAt
	if finished.IsZero() {
		finished = now
	}
	s.FinishedAt = &finished
	return true
}

// settleSubs settles the sub-calls of c still open when c's result came (its status
// and output): each takes the status its entry in the output shows, or c's own when it
// shows none; when c failed, the run no longer waits for them: canceled.
func settleSubs(c *CallRecord, status events.Status, output json.RawMessage, at time.Time) {
	for _, s := range c.Subs {
		if s.Done() {
			continue
		}
		s.Status = string(events.StatusCanceled)
		if status == events.StatusOK {
			s.Status = string(status)
			if path, ok := subPath(c.ID, s.ID); ok {
				if st, ok := subOutcome(output, path); ok {
					s.Status = st
				}
			}
		}
		s.FinishedAt = &at
	}
}

// subOutcome returns the status a composite's output gives its sub-call at path: the
// code of an error entry, ok for another entry; false when the output has no entry for
// it (its output was reformatted, say).
func subOutcome(output json.RawMessage, path []int) (string, bool) {
	var out struct {
		Results []struct {
			Result json.RawMessage `json:"result"`
		} `json:"results"`
	}
	if json.Unmarshal(output, &out) != nil || path[0] >= len(out.Results) {
		return "", false
	}
	res := out.Results[path[0]].Result
	if len(path) > 1 {
		return subOutcome(res, path[1:])
	}
	var e tools.ErrorOutput
	if json.Unmarshal(res, &e) == nil && e.Error != nil && e.Error.Code != "" {
		return string(events.StatusOf(e.Error)), true
	}
	return string(events.StatusOK), true
}
