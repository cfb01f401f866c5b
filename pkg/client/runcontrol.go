package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// ErrRunNotFound is returned by [Client.CancelRun] for a run the planner does not hold,
// or one of another tenant.
var ErrRunNotFound = errors.New("client: no such run")

// ErrForbidden is returned by [Client.CancelRun] for a run of the caller's tenant that
// its role may not act on: a run of another role, when the caller's role is not one of
// the planner's operator roles.
var ErrForbidden = errors.New("client: the caller's role may not act on the run")

// ErrRunEnded is returned by [Client.CancelRun] for a run that had ended already
// (canceled or not).
var ErrRunEnded = errors.New("client: the run has ended already")

// RunControlReply is a planner's answer to a run control request: the status its HTTP
// API would answer, the run as it stands (the API's run view, as JSON), and the error.
type RunControlReply struct {
	Status int             `json:"status"`
	Run    json.RawMessage `json:"run,omitempty"`
	Error  *struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// CancelRun asks a planner to cancel run, a run of this client's caller's tenant (for a
// client [WithIdentity]) that its role may act on (the run's owner's role, or one of the
// planner's operator roles), by request/reply on [events.RunCancelSubject], and returns
// the planner's reply. The run ends canceled at once; its calls get cancel events and
// its nested runs are canceled too. The error is [ErrRunNotFound] (another tenant's run
// too), [ErrForbidden] (a run of another role) or [ErrRunEnded] (the reply's Run is the
// run as it ended), or the request's.
func (c *Client) CancelRun(ctx context.Context, run, reason string) (RunControlReply, error) {
	var reply RunControlReply
	subj, err := events.RunCancelSubject(c.caller, run)
	if err != nil {
		return reply, err
	}
	body, err := json.Marshal(map[string]string{"by": c.source, "reason": reason})
	if err != nil {
		return reply, err
	}
	msg, err := c.js.Conn().RequestWithContext(ctx, subj, body)
	if err != nil {
		return reply, fmt.Errorf("cancel run %s: %w", run, ctxErr(ctx, err))
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return reply, fmt.Errorf("cancel run %s: the planner's reply: %w", run, err)
	}
	msgText := ""
	if reply.Error != nil {
		msgText = reply.Error.Message
	}
	switch reply.Status {
	case 200:
		return reply, nil
	case 403:
		return reply, fmt.Errorf("cancel run %s: %w: %s", run, ErrForbidden, msgText)
	case 404:
		return reply, fmt.Errorf("cancel run %s: %w", run, ErrRunNotFound)
	case 409:
		return reply, fmt.Errorf("cancel run %s: %w", run, ErrRunEnded)
	}
	return reply, fmt.Errorf("cancel run %s: the planner answered %d: %s", run, reply.Status, msgText)
}
