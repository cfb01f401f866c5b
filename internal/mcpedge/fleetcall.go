package mcpedge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// recheck is how often a waiting call also reads its result subject from the stream, in
// case the result's message was missed (a reconnect while waiting).
const recheck = 5 * time.Second

// publishCall publishes the call of tool with args as caller under id and returns once
// JetStream has stored it, with the subscription that receives its result: the result
// subject's messages, subscribed before the publish, so that the result, which only
// exists after the call, cannot be missed. The caller must Unsubscribe.
//
// pkg/client's Call would do the same, but it waits with a JetStream consumer per call,
// which the server keeps for its inactive threshold (5 minutes): past the server's 1,000
// consumers per stream a call fails ("maximum consumers limit reached"). A core
// subscription costs the server nothing beyond the call.
func (e *Edge) publishCall(ctx context.Context, caller events.Identity, id string, c events.Call) (*nats.Subscription, chan *nats.Msg, string, error) {
	subj, err := events.ResultSubject(caller.Tenant, events.ReplyID(id), events.ReplyID(id))
	if err != nil {
		return nil, nil, "", err
	}
	opts := events.CallOptions{Source: "/toolfleet/mcp-edge", ID: id, Caller: caller}
	opts.Deadline, _ = ctx.Deadline()
	msg, err := events.NewCall(opts, c)
	if err != nil {
		return nil, nil, "", err
	}
	ch := make(chan *nats.Msg, 2)
	sub, err := e.nc.ChanSubscribe(subj, ch)
	if err != nil {
		return nil, nil, "", fmt.Errorf("subscribe to the result of call %s: %w", id, err)
	}
	if _, err := e.js.PublishMsg(ctx, msg); err != nil {
		_ = sub.Unsubscribe()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, nil, "", fmt.Errorf("publish call %s: %w", id, err)
	}
	return sub, ch, subj, nil
}

// awaitResult waits for the result on subj until ctx ends.
func (e *Edge) awaitResult(ctx context.Context, ch chan *nats.Msg, subj string) (events.Result, error) {
	t := time.NewTicker(recheck)
	defer t.Stop()
	for {
		select {
		case m := <-ch:
			_, res, err := events.DecodeResult(events.CoreMsg(m))
			return e.resolve(ctx, res, err)
		case <-t.C:
			m, err := e.stream.GetLastMsgForSubject(ctx, subj)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				e.cfg.Log.Warn().Err(err).Str("subject", subj).Msg("mcp edge: reading a result from the stream failed")
				continue
			}
			_, res, err := events.DecodeResult(events.StoredMsg(m))
			return e.resolve(ctx, res, err)
		case <-ctx.Done():
			return events.Result{}, ctx.Err()
		}
	}
}

// resolve reads an output the executor stored by reference (over the claim-check size)
// into res, so the MCP client gets the output itself.
func (e *Edge) resolve(ctx context.Context, res events.Result, err error) (events.Result, error) {
	if err != nil || res.OutputRef == nil {
		return res, err
	}
	out, err := events.NewPayloads(e.js, e.cfg.Events).Get(ctx, res.OutputRef, 0)
	if err != nil {
		return res, &tools.Error{Code: tools.CodeInternal, Message: fmt.Sprintf("the output of call %s was stored by reference and cannot be read: %v", res.CallID, err)}
	}
	res.Output = out
	return res, nil
}
