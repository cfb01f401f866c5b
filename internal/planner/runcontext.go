package planner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run context for tools. A tool whose definition asks for it (tools.Definition.RunContext,
// "runContext": true in a tools file) gets with each call of a run the run's context
// (tools.RunContext): the conversation as the model saw it at the call's step (edits
// made on a resume included) followed by the model's message that made the call, the
// step, and the run's metadata. The conversation is bounded by runContextMaxBytes: the
// oldest messages are left out first, and Omitted counts them. The context travels in
// the call event (events.Call.Context), or, when it is larger than the claim-check size,
// as a payload of the run's tenant stored once per step (events.Call.ContextRef), so no
// event grows with the conversation. Tools that did not ask get nothing: the planner
// sends it only with their calls, and the executor hands it only to them.

// runContextMaxBytes bounds the messages of a run context.
const runContextMaxBytes = 1 << 20

// stepContext builds, once per step's dispatch, the run context of the step's calls.
type stepContext struct {
	p     *Planner
	run   *Run
	built bool
	rc    *tools.RunContext
	ref   *events.PayloadRef
}

// attach puts the run context on data, the call event of c, when c's tool asks for it.
func (s *stepContext) attach(ctx context.Context, c *CallRecord, data *events.Call) error {
	d, ok := s.p.cat.get(c.Name)
	if !ok || !d.RunContext {
		return nil
	}
	if !s.built {
		if err := s.build(ctx); err != nil {
			return fmt.Errorf("run context of step %d of run %s: %w", s.run.Step, s.run.ID, err)
		}
		s.built = true
	}
	data.Context, data.ContextRef = s.rc, s.ref
	return nil
}

func (s *stepContext) build(ctx context.Context) error {
	run, l := s.run, s.p.rlog
	rec, err := l.Step(ctx, run.ID, run.Step)
	if err != nil {
		return err
	}
	// The conversation before the step, as the model was asked it: the records before
	// it, whose last calls ended as the step's record says (Closed).
	before := *run
	before.Recorded, before.Injected, before.Calls = run.Step, rec.Seen, rec.Closed
	msgs, err := l.Conversation(ctx, &before)
	if err != nil {
		return err
	}
	msgs = append(msgs[:len(msgs):len(msgs)], runstore.ModelMessage(rec, run.Limits.ContextBytes()))
	encoded, omitted, err := boundMessages(msgs, runContextMaxBytes)
	if err != nil {
		return err
	}
	rc := &tools.RunContext{RunID: run.ID, Step: run.Step, Metadata: run.Metadata, Messages: encoded, Omitted: omitted}
	data, err := json.Marshal(rc)
	if err != nil {
		return err
	}
	if len(data) <= s.p.cfg.Events.ClaimCheckBytes {
		s.rc = rc
		return nil
	}
	ref, err := s.p.payloads.Put(ctx, run.Tenant, data)
	if err != nil {
		return fmt.Errorf("store the run context (%d bytes): %w", len(data), err)
	}
	s.ref = ref
	return nil
}

// boundMessages encodes the last messages of msgs that fit in max bytes (the last one
// always) as a JSON array, and says how many of the first it left out.
func boundMessages(msgs []provider.Message, max int) (json.RawMessage, int, error) {
	parts := make([][]byte, len(msgs))
	size, first := 2, len(msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		b, err := json.Marshal(msgs[i])
		if err != nil {
			return nil, 0, err
		}
		if i < len(msgs)-1 && size+len(b)+1 > max {
			break
		}
		parts[i], size, first = b, size+len(b)+1, i
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i := first; i < len(msgs); i++ {
		if i > first {
			out = append(out, ',')
		}
		out = append(out, parts[i]...)
	}
	return append(out, ']'), first, nil
}
