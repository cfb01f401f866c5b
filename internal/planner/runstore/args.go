package runstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Large arguments go by reference. A model's call whose arguments are larger than
// events.Config.ClaimCheckBytes has them stored once, as a payload of the run's tenant
// (jsutil.Payloads), when its step is recorded; from then on the reference is what is
// written and sent: the step's records on the run log hold it (the call record's
// argumentsRef, and the args record's modelRef for the model's own arguments), the call
// event carries it as arguments_ref (the executor reads and validates them), and the
// tool_called event names it instead of copying the arguments. So no run-log record or
// event grows with the arguments.
//
// The model's context: when the conversation is replayed to the model, a tool call's
// arguments larger than the run's context budget are replaced, like an output over it,
// by a JSON object with their first bytes (head), their size, the call id as a handle
// and a note ([argsWithinBudget]); the call ran with the whole arguments.

// storeLargeArguments stores, as payloads of the run's tenant, the arguments of the
// calls of rec larger than the claim-check size, and sets each call's ArgumentsRef (in
// rec.Calls and in the state the step leaves). A call stored before (a retried write)
// keeps its reference.
func (l *Log) storeLargeArguments(ctx context.Context, rec *StepRecord) error {
	tenant := ""
	if rec.State != nil {
		tenant = rec.State.Tenant
	}
	for _, c := range rec.Calls {
		if c.ArgumentsRef != nil || len(c.Arguments) <= l.claimCheck {
			continue
		}
		ref, err := l.payloads.Put(ctx, tenant, c.Arguments)
		if err != nil {
			return fmt.Errorf("Store the arguments of call %s (%d bytes): %w", c.ID, len(c.Arguments), err)
		}
		c.ArgumentsRef = ref
		if rec.State != nil {
			for _, sc := range rec.State.Calls {
				if sc.ID == c.ID {
					sc.ArgumentsRef = ref
				}
			}
		}
	}
	return nil
}

// hasLargeArguments reports whether a call of rec, or the model's arguments of one, are
// over the claim-check size: then every call's arguments get their own args record.
func (l *Log) hasLargeArguments(rec *StepRecord) bool {
	for _, c := range rec.Calls {
		if c.ArgumentsRef != nil {
			return true
		}
	}
	for _, tc := range rec.Message.ToolCalls {
		if len(tc.Arguments) > l.claimCheck {
			return true
		}
	}
	return false
}

// argsRecordOf is the args record of the model's call tc, made as call c (nil when the
// planner made none): arguments over the claim-check size are there by reference — the
// call's own payload when the model's arguments are the same bytes, else one of their
// own.
func (l *Log) argsRecordOf(ctx context.Context, tenant string, tc provider.ToolCall, c *runrec.CallRecord) (argsRecord, error) {
	a := argsRecord{Model: tc.Arguments}
	if c != nil && c.ArgumentsRef == nil && !bytes.Equal(c.Arguments, tc.Arguments) {
		a.Validated = c.Arguments
	}
	if len(tc.Arguments) <= l.claimCheck {
		return a, nil
	}
	a.Model = nil
	if c != nil && c.ArgumentsRef != nil && bytes.Equal(c.Arguments, tc.Arguments) {
		a.ModelRef = c.ArgumentsRef
		return a, nil
	}
	ref, err := l.payloads.Put(ctx, tenant, tc.Arguments)
	if err != nil {
		return a, fmt.Errorf("Store the model's arguments of call %s (%d bytes): %w", tc.ID, len(tc.Arguments), err)
	}
	a.ModelRef = ref
	return a, nil
}

// readArguments reads the arguments by reference of args record a (the model's call
// tc) and of call c into them. A payload gone is a record missing.
func (l *Log) readArguments(ctx context.Context, a argsRecord, tc *provider.ToolCall, c *runrec.CallRecord) error {
	if a.ModelRef != nil {
		data, err := l.readPayload(ctx, a.ModelRef)
		if err != nil {
			return err
		}
		tc.Arguments = data
	}
	if c == nil || c.ArgumentsRef == nil || c.Arguments != nil {
		return nil
	}
	if a.ModelRef != nil && a.ModelRef.ID == c.ArgumentsRef.ID {
		c.Arguments = tc.Arguments
		return nil
	}
	data, err := l.readPayload(ctx, c.ArgumentsRef)
	if err != nil {
		return err
	}
	c.Arguments = data
	return nil
}

func (l *Log) readPayload(ctx context.Context, ref *events.PayloadRef) (json.RawMessage, error) {
	data, err := l.payloads.Get(ctx, ref, 0)
	if jsutil.IsPayloadGone(err) {
		return nil, fmt.Errorf("%w: arguments %s: %v", ErrNoRecord, ref.ID, err)
	}
	return data, err
}

// ModelMessage is the model's message of rec as the model is shown it again: tool call
// arguments over the run's context budget replaced by [argsWithinBudget].
func ModelMessage(rec *StepRecord, budget int) provider.Message {
	msg := rec.Message
	msg.Role = provider.RoleAssistant
	copied := false
	for i, tc := range msg.ToolCalls {
		if len(tc.Arguments) <= budget {
			continue
		}
		if !copied { // the record's stay whole
			msg.ToolCalls, copied = append([]provider.ToolCall(nil), msg.ToolCalls...), true
		}
		id := tc.ID
		if i < len(rec.Calls) {
			id = rec.Calls[i].ID
		}
		msg.ToolCalls[i].Arguments = argsWithinBudget(tc.Arguments, id, budget)
	}
	return msg
}

// argsWithinBudget returns arguments over budget as the model is shown them again: a
// JSON object (arguments are one) with their first bytes, their size, the call id and
// a note; smaller ones as they are.
func argsWithinBudget(args json.RawMessage, call string, budget int) json.RawMessage {
	if len(args) <= budget { // no note to write
		return args
	}
	return truncated(args, call, budget, json.RawMessage("{}"), fmt.Sprintf(
		"These arguments are %d bytes, over this run's context budget of %d bytes: shown is their beginning (head). The call ran with the whole arguments, kept with call %s.",
		len(args), budget, call))
}

// withinBudget returns out as the model is shown it: as it is when it fits budget bytes,
// otherwise a JSON object with its first bytes and a note that the full output is kept
// in the result of call.
func withinBudget(out json.RawMessage, call string, budget int) json.RawMessage {
	if len(out) <= budget { // no note to write
		return out
	}
	return truncated(out, call, budget, json.RawMessage("null"), fmt.Sprintf(
		"The output is %d bytes, over this run's context budget of %d bytes per output: shown is its beginning (head). The full output is kept in the result of call %s.",
		len(out), budget, call))
}

// truncated is b when it fits budget bytes, otherwise a JSON object with b's first
// bytes (whole characters), its size, the call id and note; failed when that cannot be
// encoded.
func truncated(b json.RawMessage, call string, budget int, failed json.RawMessage, note string) json.RawMessage {
	if len(b) <= budget {
		return b
	}
	head := b[:budget]
	for len(head) > 0 && !utf8.RuneStart(b[len(head)]) { // do not cut a character
		head = head[:len(head)-1]
	}
	out, err := json.Marshal(struct {
		Truncated bool   `json:"truncated"`
		CallID    string `json:"callId"`
		Bytes     int    `json:"bytes"`
		Head      string `json:"head"`
		Note      string `json:"note"`
	}{true, call, len(b), string(head), note})
	if err != nil {
		return failed
	}
	return out
}
