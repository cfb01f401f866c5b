package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// What a caller needs to make a call now and look at it later, from any process: publish
// it without waiting ([Client.Submit]), then read what the fleet stored about it — its
// result ([Client.StoredResult]) and its approval while it waits for one
// ([Client.PendingApproval]). Each look-up is a direct get of one subject of the
// caller's tenant, so it holds nothing on the server and NATS permissions can check it.

// Submit publishes r and returns its call id once JetStream has stored the call, without
// waiting for its result. deadline, when not zero, travels with the call as [Client.Call]'s
// context deadline does: executors give up on the call then.
func (c *Client) Submit(ctx context.Context, r Request, deadline time.Time) (string, error) {
	if r.ID == "" {
		r.ID = nuid.Next()
	}
	if len(r.Arguments) == 0 {
		r.Arguments = json.RawMessage("{}")
	}
	opts := events.CallOptions{Source: c.source, ID: r.ID, RunID: r.RunID, Caller: c.caller, Deadline: deadline}
	msg, err := events.NewCall(opts, events.Call{Tool: r.Tool, Arguments: r.Arguments, Metadata: r.Metadata})
	if err != nil {
		return "", err
	}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return "", fmt.Errorf("publish call %s: %w", r.ID, ctxErr(ctx, err))
	}
	return r.ID, nil
}

// StoredResult returns the result of callID stored so far, a call of this client's
// caller in run (empty: the call's own run); found is false while there is none. An
// output stored by reference is read back into Output, as [Client.Call] does; unlike
// Call, a result whose status is not ok is returned without an error (its Error says
// why).
func (c *Client) StoredResult(ctx context.Context, run, callID string) (res events.Result, found bool, err error) {
	if run == "" {
		run = callID
	}
	subj, err := events.ResultSubject(c.caller.Tenant, events.ReplyID(run), events.ReplyID(callID))
	if err != nil {
		return res, false, err
	}
	m, err := c.storedResult(ctx, subj)
	if err != nil || m == nil {
		return res, false, ctxErr(ctx, err)
	}
	if _, res, err = events.DecodeResult(events.CoreMsg(m)); err != nil {
		return res, true, err
	}
	if res.OutputRef != nil {
		out, err := c.payloads.Get(ctx, res.OutputRef, 0)
		if err != nil {
			return res, true, fmt.Errorf("read the output of call %s: %w", callID, err)
		}
		res.Output = out
	}
	return res, true, nil
}

// PendingApproval returns the approval request of callID, a call of tool by this
// client's caller, while it waits for its answer: the request is stored and no answer
// is. pending is false when the call asked for none, or was answered (its result may
// not be stored yet). e is the request's event: its Time is when the approval was asked.
func (c *Client) PendingApproval(ctx context.Context, tool, callID string) (e events.Event, req events.ApprovalRequest, pending bool, err error) {
	reqSubj, err := events.ApprovalRequestedSubject(c.caller.Tenant, tool, callID)
	if err != nil {
		return e, req, false, err
	}
	// Any role of the tenant may have answered (each on its own subject): the last
	// answer of any of them is looked up with a wildcard for the role.
	ansSubj, err := events.ApprovalAnsweredSubject(events.Identity{}, tool, callID)
	if err != nil {
		return e, req, false, err
	}
	if c.caller.Tenant != "" {
		ansSubj += "." + c.caller.Tenant + ".*"
	}
	m, err := jsutil.DirectGetLast(ctx, c.nc, events.StreamEvents, reqSubj)
	if err != nil || m == nil {
		return e, req, false, ctxErr(ctx, err)
	}
	answer, err := jsutil.DirectGetLast(ctx, c.nc, events.StreamEvents, ansSubj)
	if err != nil || answer != nil {
		return e, req, false, ctxErr(ctx, err)
	}
	e, req, err = events.DecodeApprovalRequest(events.CoreMsg(m))
	return e, req, err == nil, err
}
