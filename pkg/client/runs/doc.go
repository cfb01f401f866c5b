// Package runs drives a toolfleet planner over its HTTP API: start a run and wait for
// it or follow its events as they happen, continue it with a follow-up, cancel it, list
// runs and approvals and answer them, and list the tools. It is what the toolfleet CLI
// uses; package client beside it is the fleet over NATS (tool calls, approvals as
// events).
//
//	c, err := runs.New(runs.DefaultURL, runs.WithToken(os.Getenv("TOOLFLEET_API_TOKEN")))
//	if err != nil {
//		return err
//	}
//	run, err := c.Start(ctx, runs.StartRequest{Input: "What is 6*7?", Tools: []string{"calculator"}})
//	if err != nil {
//		return err
//	}
//	for ev, err := range c.Follow(ctx, run.ID, 0) { // until the run's done event
//		if err != nil {
//			return err
//		}
//		fmt.Println(ev.What, ev.Data.Tool)
//	}
//	run, err = c.Get(ctx, run.ID) // the answer, every call with its timeline
//
// # The wire
//
// The types here are the API's JSON, defined in this package so that a client needs
// nothing of the planner's internals, with pkg/events' types where those are the wire
// types (a run event's data is [events.RunEvent], an approval [events.Approval]). They
// cover every field of the API: a test checks each type's JSON fields against its
// schema in the planner's OpenAPI document, both ways, so a run decoded and encoded
// again is the document the API served. Fields a newer planner adds are ignored. Every
// request carries the bearer token ([WithToken]), so the planner acts with its tenant and
// role; a caller sees only its tenant's runs (another's is 404).
//
// # Events
//
// [Client.Follow] reads GET /v1/runs/{id}/events (Server-Sent Events). Each event's Seq
// is its sequence on the events stream: a connection that drops is resumed after the
// last event seen (Last-Event-ID), so no event is missed or repeated, and giving a Seq
// back to Follow resumes a follow later. The stream ends with the run's done event.
// The SSE parsing is this package's own (forty lines): the planner's events are one
// data line each, and no SSE library was worth a dependency for it.
//
// # Errors
//
// A request the planner refuses is an *[Error] with its HTTP status and message (and,
// for a control request refused for the run's state, the run as it stands); a request
// that did not get an answer is the transport's error.
//
// A planner saturated by a server that falls behind refuses new runs with 429 and a
// Retry-After, before storing anything of them. The client sends such a request again
// after the wait asked for, up to [DefaultRetries] times within the request's context
// ([WithRetries] changes it; 0 returns the 429 at once, [IsBusy] recognizes it).
package runs
