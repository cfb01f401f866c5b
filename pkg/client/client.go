package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ErrInvalidOption reports a bad option of [New].
var ErrInvalidOption = errors.New("client: invalid option")

// ErrAnswered is returned by [Client.Answer] when JetStream dropped the answer because
// an answer to the call (possibly an earlier try of this one) was stored before: the
// first answer to a call wins.
var ErrAnswered = errors.New("client: the approval was answered already")

// Option configures a [Client].
type Option func(*options) error

type options struct {
	source string
	caller events.Identity
	shards int
}

// WithIdentity makes the client call, read results, follow runs and answer approvals as
// caller: a tenant's user (see [events.Identity]). The fleet takes the identity from the
// subjects the client publishes on, so the client's NATS user must be allowed them
// (deploy/k8s/base/nats, "tenants"); connect such a user with its own inbox prefix
// (nats.CustomInboxPrefix), which its permissions allow instead of _INBOX.>.
func WithIdentity(caller events.Identity) Option {
	return func(o *options) error {
		if caller.IsZero() {
			return fmt.Errorf("%w: empty identity", ErrInvalidOption)
		}
		if err := caller.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidOption, err)
		}
		o.caller = caller
		return nil
	}
}

// WithShards tells the client how many shards the fleet's results are split over
// ([events.Config].Shards). Without it, [New] asks the server (a stream list request)
// and takes 1 if that is refused.
func WithShards(n int) Option {
	return func(o *options) error {
		if n < 1 || n > events.MaxShards {
			return fmt.Errorf("%w: shards must be 1 to %d, got %d", ErrInvalidOption, events.MaxShards, n)
		}
		o.shards = n
		return nil
	}
}

// WithSource sets the CloudEvents source of what the client publishes, which names the
// caller in every call and answer. Defaults to "/toolfleet/client".
func WithSource(source string) Option {
	return func(o *options) error {
		if source == "" {
			return fmt.Errorf("%w: empty source", ErrInvalidOption)
		}
		o.source = source
		return nil
	}
}

// Client calls tools, follows runs and answers approvals on a fleet's NATS server. It
// holds no state besides its connection and is safe for concurrent use.
type Client struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	source   string
	caller   events.Identity
	payloads *jsutil.Payloads
	// shards says which results stream holds a result (events.Config.ResultStream).
	shards events.Config
	// claimCheck is the size above which arguments go by reference.
	claimCheck int
}

// New returns a client on nc. The fleet's streams must exist (any executor or planner
// creates them at start). Without [WithShards] it asks the server how many results
// shards there are, for up to 5 seconds: a program that has a context for that, or
// makes clients per request, uses [NewContext].
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	return NewContext(context.Background(), nc, opts...)
}

// NewContext is [New] whose look-up of the results shards (the only network I/O it
// does, and none with [WithShards]) ends with ctx, and in any case after 5 seconds.
func NewContext(ctx context.Context, nc *nats.Conn, opts ...Option) (*Client, error) {
	o := options{source: "/toolfleet/client"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: jetstream: %w", err)
	}
	if o.shards == 0 {
		o.shards = discoverShards(ctx, js)
	}
	cfg := events.Config{}.WithDefaults()
	claimCheck := cfg.ClaimCheckBytes
	if mp := int(nc.MaxPayload()) / 2; mp > 0 && mp < claimCheck { // a server with smaller messages
		claimCheck = mp
	}
	return &Client{nc: nc, js: js, source: o.source, caller: o.caller, payloads: jsutil.NewPayloads(js, cfg),
		shards: events.Config{Shards: o.shards}, claimCheck: claimCheck}, nil
}

// discoverShards counts the fleet's results shards (TOOLFLEET_RESULTS_<n>); 1 when there
// are none or the server does not say within 5 seconds or before ctx ends.
func discoverShards(ctx context.Context, js jetstream.JetStream) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	names := js.StreamNames(ctx, jetstream.WithStreamListSubject(events.AllResultShards))
	n := 0
	for name := range names.Name() {
		if strings.HasPrefix(name, events.StreamResults+"_") {
			n++
		}
	}
	if names.Err() != nil || n == 0 {
		return 1
	}
	return min(n, events.MaxShards)
}

// Request is a tool call to make.
type Request struct {
	// Tool is the tool's name. Required.
	Tool string
	// Arguments are the tool's arguments, a JSON object; nil means {}.
	Arguments json.RawMessage
	// ID is the call id, any CloudEvents id; empty means a fresh unique one. A call made
	// again with the same id is answered with its first result: the tool does not run
	// twice.
	ID string
	// RunID groups calls; empty makes the call its own run.
	RunID string
	// Metadata is passed to the tool (user, role, notes).
	Metadata map[string]string
	// FreshID says that ID was made unique for this call just now (a NUID, a random
	// UUID), so no result of it can be stored yet: Call skips looking for one before it
	// publishes, a request less per call. An empty ID is fresh too.
	FreshID bool
}

// Call publishes r and waits for its result until ctx ends; ctx's deadline, if any,
// travels with the call, and so does the trace context of ctx's span, if it has one
// (ce-traceparent): the executor's span of the call joins the caller's trace, and the
// result carries it back. A result whose status is not ok is returned with its error, a
// *[tools.Error]: both the result (attempts, executor, an error output) and the code are
// there for the caller. A refused request (bad tool name or id) is an invalid_event
// *tools.Error, and ctx's end its error. An output stored by reference (over the fleet's
// claim-check size) is read from its payload bucket: the result's Output holds it, and
// OutputRef says where it was. Arguments larger than the claim-check size go the same
// way: stored as a payload of the client's tenant, the call carrying arguments_ref
// (smaller ones travel in the call, with no extra round trip).
func (c *Client) Call(ctx context.Context, r Request) (events.Result, error) {
	if r.ID == "" {
		r.ID, r.FreshID = nuid.Next(), true
	}
	if len(r.Arguments) == 0 {
		r.Arguments = json.RawMessage("{}")
	}
	opts := events.CallOptions{Source: c.source, ID: r.ID, RunID: r.RunID, Caller: c.caller}
	opts.Deadline, _ = ctx.Deadline()
	opts.TraceParent, opts.TraceState = events.TraceFromContext(ctx) // "" unless ctx has a span
	call := events.Call{Tool: r.Tool, Arguments: r.Arguments, Metadata: r.Metadata}
	if len(r.Arguments) > c.claimCheck { // by reference: stored once, under the caller's tenant
		// Refused now what NewCall would refuse, before anything is stored.
		if err := events.ValidateTool(r.Tool); err != nil {
			return events.Result{}, err
		}
		if err := events.ValidateEventID("call id", r.ID); err != nil {
			return events.Result{}, err
		}
		ref, err := c.payloads.Put(ctx, c.caller.Tenant, r.Arguments)
		if err != nil {
			return events.Result{}, fmt.Errorf("store the arguments of call %s: %w", r.ID, ctxErr(ctx, err))
		}
		call.Arguments, call.ArgumentsRef = nil, ref
	}
	msg, err := events.NewCall(opts, call)
	if err != nil {
		return events.Result{}, err
	}
	run := r.RunID
	if run == "" {
		run = r.ID
	}
	subj, err := events.ResultSubject(c.caller.Tenant, events.ReplyID(run), events.ReplyID(r.ID))
	if err != nil {
		return events.Result{}, err
	}
	m, err := c.publishAndAwait(ctx, subj, msg, !r.FreshID)
	if err != nil {
		return events.Result{}, fmt.Errorf("call %s: %w", r.ID, err)
	}
	_, res, err := events.DecodeResult(events.CoreMsg(m))
	if err != nil {
		return res, err
	}
	if res.OutputRef != nil { // stored by reference: the caller gets the output itself
		out, err := c.payloads.Get(ctx, res.OutputRef, 0)
		if err != nil {
			return res, fmt.Errorf("read the output of call %s: %w", r.ID, err)
		}
		res.Output = out
	}
	if res.Status != events.StatusOK {
		if res.Error == nil { // a result from outside the fleet may leave it out
			return res, tools.Errorf(tools.CodeToolFailed, "call %s ended with status %s", r.ID, res.Status)
		}
		return res, res.Error
	}
	return res, nil
}

// Answer publishes an approver's answer to the approval of callID, a call of tool (as
// an [events.ApprovalRequest] names them), and returns once it is stored. The executors
// serving tool carry it out: deny, approve, or approve with new arguments. The first
// answer to a call wins: all answers to a call share one event id, so JetStream drops a
// later one within its duplicate window ([ErrAnswered]), and executors ignore it after.
func (c *Client) Answer(ctx context.Context, tool, callID string, a events.ApprovalAnswer) error {
	msg, err := events.NewApprovalAnswer(c.source, c.caller, tool, callID, a)
	if err != nil {
		return err
	}
	ack, err := c.js.PublishMsg(ctx, msg)
	if err != nil {
		return fmt.Errorf("publish the answer to the approval of call %s: %w", callID, ctxErr(ctx, err))
	}
	if ack.Duplicate {
		return fmt.Errorf("answer to the approval of call %s: %w", callID, ErrAnswered)
	}
	return nil
}

// Cancel asks the fleet to stop callID, a call of tool, as this client's caller (its
// tenant and role, for a client [WithIdentity]), and returns once the cancel is stored.
// Executors act on it only when the caller may act on the call: it made it, or its role
// is one of the fleet's operator roles in the call's tenant (events.MayAct); another
// role's cancel is refused and recorded, and the call goes on. It does not wait for the
// call's answer ([Client.CancelAndWait] does), which says what happened: canceled
// (status and code) when the call stopped because of it or had not started (a call still
// waiting in the stream, or parked for approval, is answered without running);
// interrupted when a non-idempotent tool was cut mid-run (its effect may be partly
// done); or the call's normal result when it had finished already, or when the cancel
// was refused. Cancelling twice is harmless.
func (c *Client) Cancel(ctx context.Context, tool, callID string) error {
	msg, err := c.cancelMsg(tool, callID)
	if err != nil {
		return err
	}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish the cancel of call %s: %w", callID, ctxErr(ctx, err))
	}
	return nil
}

// CancelAndWait is [Client.Cancel] that waits, until ctx ends, for the outcome: the
// call's result, in run (empty: the call's own run), which says what happened. A result
// whose status is not ok (canceled, interrupted) is the outcome, not an error; the
// error is for a cancel or a wait that failed. A call answered before is answered at
// once, without a cancel. An executor acts on a cancel at once when it hears it, and
// when it missed its message within a third of its ack wait (10s by default), or for a
// call parked for approval within one sweep of its approvals (5s by default).
func (c *Client) CancelAndWait(ctx context.Context, tool, run, callID string) (events.Result, error) {
	msg, err := c.cancelMsg(tool, callID)
	if err != nil {
		return events.Result{}, err
	}
	if run == "" {
		run = callID
	}
	subj, err := events.ResultSubject(c.caller.Tenant, events.ReplyID(run), events.ReplyID(callID))
	if err != nil {
		return events.Result{}, err
	}
	m, err := c.publishAndAwait(ctx, subj, msg, true)
	if err != nil {
		return events.Result{}, fmt.Errorf("cancel call %s: %w", callID, err)
	}
	_, res, err := events.DecodeResult(events.CoreMsg(m))
	return res, err
}

func (c *Client) cancelMsg(tool, callID string) (*nats.Msg, error) {
	return events.NewCancel(c.source, c.caller, tool, callID, events.Cancel{By: c.source})
}

// publishAndAwait publishes msg and returns the message stored on subj next (a result),
// waiting until ctx ends; with lookFirst, a message stored on subj already is returned
// without publishing msg.
//
// The wait is a core subscription to the result's subject, made before the publish:
// a JetStream consumer per call would outlive the call on the server (and past the
// server's consumers per stream, calls would fail). A result stored before the
// subscription (the id was answered before) is found by a direct get, and one missed
// while the connection was down by the same look-up, every few seconds. One result
// is awaited: a channel of one (a synchronous subscription's buffer holds 65,536),
// and the subscription ends itself with it (AutoUnsubscribe, sent with the
// subscription and the call): no unsubscribe goes out after the result, when the
// caller waits. The deferred Unsubscribe covers the other ends, and is a no-op after
// a result came.
func (c *Client) publishAndAwait(ctx context.Context, subj string, msg *nats.Msg, lookFirst bool) (*nats.Msg, error) {
	results := make(chan *nats.Msg, 1)
	sub, err := c.nc.ChanSubscribe(subj, results)
	if err != nil {
		return nil, fmt.Errorf("await the result: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.AutoUnsubscribe(1); err != nil {
		return nil, fmt.Errorf("await the result: %w", err)
	}
	if lookFirst {
		if m, err := c.storedResult(ctx, subj); err != nil || m != nil {
			if err != nil {
				return nil, fmt.Errorf("await the result: %w", ctxErr(ctx, err))
			}
			return m, nil
		}
	}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, ctxErr(ctx, err))
	}
	m, err := c.awaitResult(ctx, results, subj)
	if err != nil {
		return nil, fmt.Errorf("await the result: %w", err)
	}
	return m, nil
}

// ctxErr prefers ctx's error to the one a cancelled request reports.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// recheck is how often a call waiting for its result also looks it up in the stream.
const recheck = 5 * time.Second

// awaitResult waits for the message on results, looking subj up in the results stream
// every recheck, until ctx ends.
func (c *Client) awaitResult(ctx context.Context, results <-chan *nats.Msg, subj string) (*nats.Msg, error) {
	t := time.NewTimer(recheck)
	defer t.Stop()
	for {
		select {
		case m := <-results:
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			t.Reset(recheck)
		}
		if m, err := c.storedResult(ctx, subj); err != nil || m != nil {
			return m, err
		}
	}
}

// storedResult is the result stored on subj, by a direct get; nil when there is none.
func (c *Client) storedResult(ctx context.Context, subj string) (*nats.Msg, error) {
	return jsutil.DirectGetLast(ctx, c.nc, c.shards.ResultStream(subj), subj)
}
