package mcpedge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Progress of a long call. A tools/call whose _meta carries a progressToken gets the
// executor's run events of its call as notifications/progress before its result:
// tool_started ("started") and every tool_progress (the tool's message), each with a
// progress counter that grows by one and _meta io.toolfleet/callId (and
// io.toolfleet/fraction when the tool said how far it got). They are read from a core
// subscription to the call's run events, made before the call is published, so none
// is missed; executors publish at most ten a second per call.

// progressTokenKey is how a request that asks for progress is told from one that does not.
var progressTokenKey = []byte(`"progressToken"`)

// byProgress serves a POST whose body holds a progress token with streamed, whose
// responses are SSE streams (a notification can precede the result only there), and
// every other request with fast when it answers it (fastcall.go), else with plain, which
// answers plain JSON: cheaper, and what most clients take. Telling them apart needs the
// body, read once here and handed on; a token that is only text inside the arguments
// costs an SSE response, which any streamable HTTP client reads as well.
func byProgress(plain, streamed http.Handler, fast func(http.ResponseWriter, *http.Request, []byte) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			plain.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		if bytes.Contains(body, progressTokenKey) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			streamed.ServeHTTP(w, r)
			return
		}
		if fast != nil && fast(w, r, body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		plain.ServeHTTP(w, r)
	})
}

// forwardProgress sends the run events of call id (of tenant's caller) to ss as
// progress notifications for token, until stop, which returns once the last one is
// sent: the result goes after them.
func (e *Edge) forwardProgress(ctx context.Context, ss *mcp.ServerSession, token any, tenant, id string) (stop func(), err error) {
	filter, err := events.RunEventsSubject(tenant, id)
	if err != nil {
		return nil, err
	}
	msgs := make(chan *nats.Msg, 64)
	sub, err := e.nc.ChanSubscribe(filter, msgs)
	if err != nil {
		return nil, err
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for {
			select {
			case <-quit:
				return
			case m := <-msgs:
				p, ok := progressOf(m)
				if !ok {
					continue
				}
				n++
				p.ProgressToken, p.Progress = token, float64(n)
				p.Meta["io.toolfleet/callId"] = id
				if err := ss.NotifyProgress(ctx, p); err != nil {
					e.cfg.Log.Debug().Err(err).Str("call_id", id).Msg("mcp edge: progress notification not sent")
				}
			}
		}
	}()
	return func() {
		_ = sub.Unsubscribe()
		close(quit)
		<-done
	}, nil
}

// progressOf is the notification of a run event: tool_started or tool_progress; ok is
// false for any other event.
func progressOf(m *nats.Msg) (p *mcp.ProgressNotificationParams, ok bool) {
	_, what, r, err := events.DecodeRunEvent(events.CoreMsg(m))
	if err != nil {
		return nil, false
	}
	p = &mcp.ProgressNotificationParams{Meta: mcp.Meta{}}
	switch what {
	case "tool_started":
		p.Message = "started"
	case "tool_progress":
		var tp tools.Progress
		if len(r.Detail) > 0 && json.Unmarshal(r.Detail, &tp) != nil {
			return nil, false
		}
		p.Message = tp.Message
		if tp.Fraction > 0 {
			p.Meta["io.toolfleet/fraction"] = tp.Fraction
		}
	default:
		return nil, false
	}
	return p, true
}
