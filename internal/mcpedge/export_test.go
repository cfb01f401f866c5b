package mcpedge

import "net/http"

// SDKHandler is Handler without the fast path: every request is the SDK's.
func (e *Edge) SDKHandler() http.Handler { return e.handler(nil) }

// FastCalls is how many tools/calls the fast path answered.
func (e *Edge) FastCalls() int64 { return e.fastCalls.Load() }
