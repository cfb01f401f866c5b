package jsutil

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// AskHook sends question as JSON to the hook, with header (nil: none; e.g. the trace
// context), and decodes its answer into answer, waiting at most the hook's timeout within
// ctx. An error says why there is no usable answer: nobody listens, no answer in time, or
// an answer that is not the JSON of answer (quoted, cut at 200 bytes).
func AskHook(ctx context.Context, nc *nats.Conn, h events.Hook, header nats.Header, question, answer any) error {
	b, err := json.Marshal(question)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, h.Wait())
	defer cancel()
	reply, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: h.Subject, Header: header, Data: b})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(reply.Data, answer); err != nil {
		return fmt.Errorf("unreadable answer %.200q: %v", reply.Data, err)
	}
	return nil
}

// AskPolicy asks the policy hook h about the call req (with header, e.g. the trace
// context; nil: none) and returns its decision as a record, never failing: a hook
// that cannot be asked, does not answer in time or answers something unusable gets its
// onError (deny unless it is allow), with Error saying why.
func AskPolicy(ctx context.Context, nc *nats.Conn, h events.Hook, header nats.Header, req events.PolicyRequest) events.PolicyRecord {
	var ans events.PolicyAnswer
	err := AskHook(ctx, nc, h, header, req, &ans)
	if err == nil {
		err = ans.Check()
	}
	rec := events.PolicyRecord{Level: req.Level, Hook: h.Subject, At: time.Now().UTC()}
	if err != nil {
		rec.Decision, rec.Error = events.PolicyDeny, err.Error()
		if h.OnError == events.PolicyOnErrorAllow {
			rec.Decision = events.PolicyAllow
		}
		return rec
	}
	rec.Decision, rec.Reason = ans.Decision, ans.Reason
	if ans.Decision == events.PolicyModify {
		rec.ArgumentsOriginal, rec.ArgumentsOriginalRef, rec.ArgumentsModified = req.Arguments, req.ArgumentsRef, ans.Arguments
	}
	return rec
}
