// Package inspector serves the web inspector: a page for a tenant's runs (live, with
// filters), one run (its conversation, a waterfall of its steps and calls, every call's
// arguments, output, errors, attempts, approvals and policy, the picker's choices, its
// nested runs, and the actions the caller may take on it), the approvals waiting across
// runs, and the fleet (tools, executors, queues, dead letters). cmd/planner and
// `toolfleet dev` serve it at [Path] beside the API ([Mount]).
//
// # Why this stack
//
// The page is a small front end with no build step: one HTML file, one stylesheet and
// one script of plain JavaScript (ES2020, no framework and no third-party library), all
// embedded with go:embed and served from this binary, so the inspector needs no CDN, no
// network and no toolchain beyond Go. Its data is the planner's JSON API itself
// (/v1/runs, /v1/runs/{id}, /v1/approvals, /v1/tools, /v1/dead-letters, /v1/events),
// called from the browser with the caller's own token, so the inspector can never show
// or do more than the same token can with curl: tenancy, roles and validation are the
// API's, answered the same way (a refused action shows the API's message, an invalid
// modified argument the validator's violations). Server-rendered templates would have
// needed a second, cookie-based session beside the bearer tokens and a copy of every
// view in Go; a framework would have needed a bundler. What the script does by hand is
// small: build DOM nodes (always through textContent, never HTML strings, so no output
// of a tool can inject markup), route on the URL's hash, and read Server-Sent Events.
//
// # Tokens and live updates
//
// The token page keeps the token in the tab's sessionStorage (gone when the tab
// closes; never in a cookie or URL) and every request sends it as Authorization:
// Bearer. In open mode (the API answers without a token) the page asks for none.
//
// A run page's "Rerun and compare" section reruns the run from any step (POST
// /v1/runs/{id}/fork, with the edits of the conversation the model was asked at that
// step, read from /v1/runs/{id}/messages?view=model&step=K, and what is reused said
// before), links a fork's origin and a run's forks (GET /v1/runs?forkedFrom=), and the
// runs list picks two runs for the compare page.
//
// Live updates come from the API's SSE endpoints, /v1/events (every run event of the
// caller's tenant) and /v1/runs/{id}/events, read with fetch and a stream reader rather
// than EventSource: EventSource cannot send an Authorization header, and fetch can, so
// the token never goes into a query string (where proxies and access logs keep it) and
// the API needed no second way to authenticate. The reader resumes after the last
// event id it saw (Last-Event-ID) when the connection drops, with a backoff. An event
// marks what it touches as stale and the page fetches it again at most a few times a
// second, so a run of a thousand calls costs a bounded number of requests, and no page
// polls: the fleet page's queue figures are fetched again when run events arrive or
// when asked.
//
// # Pages
//
// Routes are the URL's fragment (#/runs, #/runs/{id}, #/approvals, #/fleet, and
// #/compare?a=A&b=B: two runs' steps aligned, from GET /v1/runs/{a}/diff/{b}), so the
// server serves one document for every path under [Path] and every view has an address
// to share. Every control is a button, link, form field or details element, reachable
// by keyboard. At a phone's 390 px nothing but a table scrolls sideways: JSON and long
// words wrap, the waterfall's labels wrap rather than being cut, and a long wait for a
// person (or a pause) is collapsed to a marked gap so the short calls beside it stay
// readable.
package inspector
