// Package client is what a program needs to use a toolfleet fleet over NATS: call a tool
// and get its result, follow a planner run's events, and answer approvals. It speaks the
// event contract of package events and nothing else, so whatever it does any NATS client
// could do with the same events.
//
// # Calling a tool
//
//	c, err := client.New(nc)
//	if err != nil {
//		return err
//	}
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // the call's deadline
//	defer cancel()
//	res, err := c.Call(ctx, client.Request{Tool: "calculator", Arguments: json.RawMessage(`{"expression":"6*7"}`)})
//	var te *tools.Error
//	switch {
//	case errors.As(err, &te): // the fleet answered with an error: te.Code says which
//	case err != nil: // no answer: ctx ended, or NATS failed
//	default: // res.Output is the tool's output
//	}
//
// [Client.Call] publishes the call with [events.NewCall] and reads its result from the
// results stream, so a result stored before the wait began (a call made again with the
// same id) is found, and a call is answered once whatever its id: reusing an id returns
// the first answer without running the tool again. The context's deadline travels with
// the call: executors give up on it once the caller has stopped waiting.
//
// # Runs and approvals
//
// Over NATS a planner announces each run's lifecycle on toolfleet.event.run.<run>.<what>
// ([Client.FollowRun] reads them, from the run's first) and relays the approval requests
// of unsafe tools, which executors publish on toolfleet.event.approval.requested.>
// ([Client.WatchApprovals]); [Client.Answer] approves or denies one (the first answer to
// a call wins; a later one is [ErrAnswered]). Starting a run is
// not part of the NATS contract today: it is the planner's HTTP API, which package
// client/runs drives (start, wait, follow, follow-up, cancel, approvals, tools).
//
// # Errors
//
// A failure the fleet reports is a *[tools.Error] with a [tools.Code]: invalid_input,
// no_such_tool, denied, timeout, tool_failed and the rest; match them with errors.Is
// against the tools.Err… values. A request this package refuses before sending
// (an invalid tool name, an empty approval decision) is an invalid_event *tools.Error.
// The context's error is returned when it ends first.
package client
