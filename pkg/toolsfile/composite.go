package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Composite runs several tools of the fleet in one call (reference 00's composite
// tools): its arguments are {"calls":[{"name":TOOL,"args":{...}}, ...]}, the sub-calls
// run in order, a failing one does not stop the others, and the output is
// {"results":[{"name":TOOL,"result":OUTPUT}, ...]}, a failed sub-call's result being its
// error output.
//
// Each sub-call is a real fleet call: published on the sub-tool's subject with the
// composite call's caller (tenant and role), run id and metadata, answered by whichever
// executor serves the sub-tool — with its own validation, callbacks, retries, approvals
// and result, which the run's followers see like any other call. Its call id is the
// composite call's id followed by "-sub-" and its position, so a composite retried or
// redelivered gets the stored results of the sub-calls that already ran instead of
// running them again.
//
// A composite call that ends without the result of the sub-call it waits for — canceled,
// or out of time — cancels that sub-call, as its caller (the same identity, so the
// executors allow it), so that a sub-call waiting for an approval is answered canceled
// at once instead of running, if approved, after its composite gave up on it. (The
// sub-call carries the composite's deadline, so a retried composite could not have it
// anyway.) A composite cut short by its executor's shutdown leaves it: the call is
// handed back, and its next run awaits the same sub-call.
type Composite struct {
	// Tools are the sub-tools, by name: any tool the fleet serves.
	Tools []string `json:"tools"`
}

func (c *Composite) check(self string) []string {
	var p []string
	if len(c.Tools) == 0 {
		p = append(p, "composite: list at least one sub-tool in tools")
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		switch {
		case !tools.NamePattern.MatchString(t):
			p = append(p, fmt.Sprintf("composite: sub-tool name %q must match %s", t, tools.NamePattern))
		case t == self:
			p = append(p, "composite: it cannot list itself")
		case seen[t]:
			p = append(p, fmt.Sprintf("composite: sub-tool %q is listed twice", t))
		}
		seen[t] = true
	}
	return p
}

// compositeFields are the fields a composite entry may have: its own settings, not
// those it takes from its sub-tools (schema, idempotence) or that only a runner has.
// Safety comes from the sub-tools (safe only if every one is, a tool served elsewhere
// counting as unsafe) unless the entry sets safe itself: each sub-call still waits for
// its own tool's approval.
var compositeFields = map[string]bool{
	"type": true, "name": true, "description": true, "tags": true, "capabilities": true, "safe": true,
	"roles": true, "tenants": true, "timeout": true, "final": true, "retry": true,
	"rateLimit": true, "maxInFlightPerTenant": true, "limitWait": true,
	"composite": true, "callbacks": true, "policyHook": true,
}

// definition is the composite's definition over the sub-tools reg serves now; a
// sub-tool it does not serve is taken to be served elsewhere in the fleet, and its
// arguments are checked there.
func (s *Spec) compositeDefinition(reg *tools.Registry) (tools.Definition, error) {
	subs := make([]tools.Definition, 0, len(s.Composite.Tools))
	for _, name := range s.Composite.Tools {
		d, ok := reg.Lookup(name)
		if !ok {
			d = tools.Definition{Name: name, Description: "(served elsewhere in the fleet)"}
		}
		subs = append(subs, d)
	}
	def, err := tools.CompositeDefinition(s.Definition.Name, s.Definition.Description, subs)
	if err != nil {
		return def, err
	}
	own := s.Definition
	own.Parameters, own.Description, own.Idempotent, own.Composite = def.Parameters, def.Description, def.Idempotent, def.Composite
	if !s.safeDeclared {
		own.Safe = def.Safe
	}
	return own, nil
}

type subCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type subResult struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
}

// run makes the sub-calls through the fleet. A sub-call answered with a failure is its
// error output in the results; a sub-call that cannot be made (the fleet cannot be
// reached) fails the whole call with internal, which the composite's retries try again
// without running twice the sub-calls that have results.
func (c *Composite) run(ctx context.Context, name string, args json.RawMessage) (any, error) {
	var in struct {
		Calls []subCall `json:"calls"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, tools.Wrap(tools.CodeInvalidInput, err, fmt.Sprintf("composite %s: arguments: %v", name, err))
	}
	fleet, ok := executor.FleetFrom(ctx)
	if !ok {
		return nil, tools.Errorf(tools.CodeInternal, "composite %s makes its sub-calls through the fleet: serve it from an executor", name)
	}
	info, _ := tools.CallInfoFrom(ctx)
	opts := []client.Option{client.WithShards(max(fleet.Events.Shards, 1)), client.WithSource("/toolfleet/composite/" + name)}
	if id := (events.Identity{Tenant: info.Tenant, Role: info.Role}); !id.IsZero() {
		opts = append(opts, client.WithIdentity(id))
	}
	cl, err := client.NewContext(ctx, fleet.Conn, opts...)
	if err != nil {
		return nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("composite %s: %v", name, err))
	}
	js, err := jetstream.New(fleet.Conn)
	if err != nil {
		return nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("composite %s: %v", name, err))
	}
	cat, err := jsutil.OpenCatalog(ctx, js, fleet.Events)
	if err != nil {
		return nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("composite %s: open the catalog: %v", name, err))
	}
	meta := make(map[string]string, len(info.Metadata)+2)
	for k, v := range info.Metadata {
		meta[k] = v
	}
	meta[events.MetaCompositeTool], meta[events.MetaCompositeCall] = name, info.CallID
	results := make([]subResult, 0, len(in.Calls))
	for i, call := range in.Calls {
		out, err := c.subCall(ctx, cl, cat, info, meta, i, call)
		if err != nil {
			if why := endedFor(ctx, fleet); why != "" {
				abandon(ctx, js, fleet, name, info, call.Name, SubCallID(info.CallID, i), why)
			}
			return nil, err
		}
		results = append(results, subResult{Name: call.Name, Result: out})
	}
	return struct {
		Results []subResult `json:"results"`
	}{results}, nil
}

// subCall makes call, the i-th sub-call, and returns its output (or error output).
func (c *Composite) subCall(ctx context.Context, cl *client.Client, cat *jsutil.Catalog, info tools.CallInfo,
	meta map[string]string, i int, call subCall) (json.RawMessage, error) {
	if !slices.Contains(c.Tools, call.Name) {
		return tools.Errorf(tools.CodeNoSuchTool, "unknown sub-tool: %s", call.Name).ForModel(), nil
	}
	// A call of a tool nobody serves would wait for its deadline: ask the catalog.
	if _, served, err := cat.Get(ctx, call.Name); err != nil {
		return nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("look up sub-tool %s in the catalog: %v", call.Name, err))
	} else if !served {
		return tools.Errorf(tools.CodeNoSuchTool, "sub-tool %s is not served by any executor of the fleet", call.Name).ForModel(), nil
	}
	if len(call.Args) == 0 {
		call.Args = json.RawMessage("{}")
	}
	res, err := cl.Call(ctx, client.Request{Tool: call.Name, Arguments: call.Args, ID: SubCallID(info.CallID, i),
		RunID: info.RunID, Metadata: meta})
	var te *tools.Error
	switch {
	case err == nil, len(res.Output) > 0:
		return res.Output, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &te) && te.Code == tools.CodeInvalidEvent:
		return te.ForModel(), nil
	}
	return nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("sub-call %d (%s): %v", i+1, call.Name, err))
}

// endedFor says why the composite call of ctx ended ("was canceled", "ran out of
// time"), or "" when ctx has not ended or the executor is stopping (the call is handed
// back and runs again elsewhere).
func endedFor(ctx context.Context, fleet executor.Fleet) string {
	select {
	case <-fleet.Stopped:
		return ""
	default:
	}
	switch err := ctx.Err(); {
	case errors.Is(err, context.Canceled):
		return "was canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "ran out of time"
	}
	return ""
}

// abandonTimeout bounds the publish of an abandoned sub-call's cancel.
const abandonTimeout = 10 * time.Second

// abandon publishes the cancel of the sub-call id, a call of tool, that the composite
// call of info (a call of composite) ends without, as the composite call's caller: the
// executors answer it canceled if it has not run, or stop it. The composite's context has
// ended, so the cancel goes out under a context of its own. A cancel that cannot be
// published is logged: the sub-call is then answered when its approval expires, or runs
// to its end.
func abandon(ctx context.Context, js jetstream.JetStream, fleet executor.Fleet, composite string, info tools.CallInfo, tool, id, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	caller := events.Identity{Tenant: info.Tenant, Role: info.Role}
	msg, err := events.NewCancel("/toolfleet/composite/"+composite, caller, tool, id, events.Cancel{RunID: info.RunID,
		Reason: fmt.Sprintf("its composite call %s of %s %s", info.CallID, composite, why)})
	if err == nil {
		_, err = js.PublishMsg(ctx, msg)
	}
	if err != nil {
		fleet.Log.Warn().Err(err).Str("tool", composite).Str("call_id", info.CallID).Str("sub_call_id", id).
			Msg("composite: the cancel of a sub-call it ended without was not published")
	}
}

// SubCallID is the call id of the i-th (from 0) sub-call of the composite call callID
// ([events.SubCallID]).
func SubCallID(callID string, i int) string { return events.SubCallID(callID, i) }

// compositeCycles reports each composite of the file that reaches itself through other
// composites of the file: its calls would nest without end, each level holding a slot
// of an executor while it waits for the next.
func compositeCycles(specs []Spec) []error {
	subs := map[string][]string{}
	for _, s := range specs {
		if s.Composite != nil {
			subs[s.Definition.Name] = s.Composite.Tools
		}
	}
	var errs []error
	for _, s := range specs {
		if s.Composite == nil {
			continue
		}
		start := s.Definition.Name
		seen := map[string]bool{}
		var reaches func(name string) bool
		reaches = func(name string) bool {
			for _, t := range subs[name] {
				if t == start && name != start {
					return true
				}
				if !seen[t] {
					seen[t] = true
					if reaches(t) {
						return true
					}
				}
			}
			return false
		}
		if reaches(start) {
			errs = append(errs, fmt.Errorf("%w %s: composite: it reaches itself through the file's other composites; their calls would nest without end", ErrInvalidFile, s.Source))
		}
	}
	return errs
}
