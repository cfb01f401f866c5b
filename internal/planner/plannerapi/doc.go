// Package plannerapi serves the planner's HTTP API over a [planner.Planner]: runs, their
// conversation and their events as Server-Sent Events, approvals and run control, behind
// bearer tokens.
//
// # Serving
//
//	p, err := planner.New(ctx, nc, planner.Config{Models: models})
//	go p.Run(ctx)
//	tokens, err := plannerapi.LoadTokens("tokens.json")
//	err = http.ListenAndServe(":8080", plannerapi.Handler(p, plannerapi.Auth{Tokens: tokens}))
//
// cmd/planner and `toolfleet dev` serve internal/mcpedge beside it on the same address
// (mcpedge.Mount). [Handler] lists the endpoints.
//
// # What is HTTP's and what is the planner's
//
// A handler decodes the request strictly (unknown fields, trailing data and bodies over
// 4 MiB are refused), identifies the caller from its bearer token ([Auth]; never from
// the body) and calls one method of the planner. Who may see and act on a run is the
// planner's rule, the same over HTTP, MCP and NATS: a run of another tenant is not
// found (404), a role that may not act on it is refused (403).
//
// The planner's methods fail with a [planner.APIError], which carries the status
// answered here. This package adds its own: a malformed or empty body 400, a body too
// large 413, another content type 415, a missing or wrong token 401, an unknown endpoint
// 404; NATS not answering in time is 503 with Retry-After (try again), any other
// failure 500. Every error answers {"error":{"status","message","violations","approval"}};
// a control request refused for a run's state (409) has the run beside it, {"error","run"}.
//
// # Lists and the API's description
//
// GET /v1/runs, /v1/approvals, /v1/tools and /v1/dead-letters are the planner's lists
// (lists.go): their query parameters are checked here, a bad or unknown one is a 400
// that names it. openapi.yaml is the OpenAPI 3.1 document of the whole API, embedded and
// served as JSON at /openapi.json without a token; TestOpenAPIRoutes and
// TestOpenAPIConformance keep it true (every route, every body).
//
// # Events
//
// GET /v1/runs/{id}/events is [planner.Planner.FollowEvents] as SSE: each event's id is
// its sequence on the events stream, its name the event's kind and its data the event's
// data on one line. A client reconnecting with Last-Event-ID (or ?lastEventId=) gets the
// events after that one; one that saw the run's done event is answered 204, which tells
// an EventSource to stop reconnecting. GET /v1/events is
// [planner.Planner.FollowTenantEvents]: the events of every run of the caller's tenant
// from now on (or after Last-Event-ID), in the same form; it does not end by itself.
package plannerapi
