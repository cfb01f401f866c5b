package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Names of the planner's storage and the picker's subject, from the code that uses them.
const (
	streamPlan       = events.StreamPlan
	bucketRuns       = events.BucketRuns
	consumerResults  = events.PlannerResultsConsumer
	consumerPlan     = events.PlannerStepsConsumer
	consumerApproval = events.PlannerApprovalsConsumer
	pickSubject      = pickerservice.PickSubject
)

var echoDef = tools.Definition{Type: "function", Name: "echo", Description: "Echoes its input.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`), Safe: true}

// TestLeastPrivilege walks one call through the fleet with every part under its own
// user, then tries what each part must not do.
func TestLeastPrivilege(t *testing.T) {
	srv := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cfg := events.DefaultConfig()

	executor := srv.connect(t, "executor")
	planner := srv.connect(t, "planner")
	picker := srv.connect(t, "picker")

	// The executor starts first: it creates every stream and bucket, its consumers, and
	// puts its tool in the catalog.
	if err := jsutil.Ensure(ctx, executor.js, cfg); err != nil {
		t.Fatalf("executor: jsutil.Ensure: %v", err)
	}
	callCfg, err := cfg.CallConsumer("echo")
	if err != nil {
		t.Fatal(err)
	}
	calls, err := executor.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, callCfg)
	if err != nil {
		t.Fatalf("executor: create %s: %v", callCfg.Durable, err)
	}
	apprCfg, err := cfg.ApprovalConsumer("echo")
	if err != nil {
		t.Fatal(err)
	}
	answers, err := executor.js.CreateOrUpdateConsumer(ctx, events.StreamEvents, apprCfg)
	if err != nil {
		t.Fatalf("executor: create %s: %v", apprCfg.Durable, err)
	}
	catalog, err := jsutil.OpenCatalog(ctx, executor.js, cfg)
	if err != nil {
		t.Fatalf("executor: open catalog: %v", err)
	}
	if err := catalog.Put(ctx, echoDef); err != nil {
		t.Fatalf("executor: catalog put: %v", err)
	}

	// A second start of any part runs Ensure again: it must be allowed to find and
	// update what exists.
	if err := jsutil.Ensure(ctx, planner.js, cfg); err != nil {
		t.Fatalf("planner: jsutil.Ensure over existing streams: %v", err)
	}

	// The picker watches the catalog and serves pick.
	pickerCatalog, err := jsutil.OpenCatalog(ctx, picker.js, cfg)
	if err != nil {
		t.Fatalf("picker: open catalog: %v", err)
	}
	changes, err := pickerCatalog.Watch(ctx)
	if err != nil {
		t.Fatalf("picker: watch catalog: %v", err)
	}
	if ch := next(t, changes); ch.Name != "echo" || ch.Removed {
		t.Fatalf("picker: catalog watch saw %+v, want echo", ch)
	}
	svc, err := micro.AddService(picker.nc, micro.Config{Name: "toolfleet-picker", Version: "0.1.0"})
	if err != nil {
		t.Fatalf("picker: add micro service: %v", err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddGroup("toolfleet.picker").AddEndpoint("pick", micro.HandlerFunc(func(r micro.Request) {
		_ = r.RespondJSON([]string{"echo"})
	}))
	if err != nil {
		t.Fatalf("picker: add pick endpoint: %v", err)
	}
	embeddings, err := picker.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "toolfleet-embeddings"})
	if err != nil {
		t.Fatalf("picker: embeddings bucket: %v", err)
	}
	if _, err := embeddings.Put(ctx, "echo", []byte("[0.1,0.2]")); err != nil {
		t.Fatalf("picker: embeddings put: %v", err)
	}

	// The planner: its own stream and bucket, its durable consumers, a pick, a call.
	runs, err := jsutil.EnsurePlanner(ctx, planner.js, cfg)
	if err != nil {
		t.Fatalf("planner: ensure %s and %s: %v", streamPlan, bucketRuns, err)
	}
	plannerCatalog, err := jsutil.OpenCatalog(ctx, planner.js, cfg)
	if err != nil {
		t.Fatalf("planner: open catalog: %v", err)
	}
	if _, ok, err := plannerCatalog.Get(ctx, "echo"); err != nil || !ok {
		t.Fatalf("planner: catalog get echo: ok=%v err=%v", ok, err)
	}
	plannerChanges, err := plannerCatalog.Watch(ctx)
	if err != nil {
		t.Fatalf("planner: watch catalog: %v", err)
	}
	next(t, plannerChanges)
	results := durable(ctx, t, planner, events.StreamResults, consumerResults, events.AllResults)
	plan := durable(ctx, t, planner, streamPlan, consumerPlan, events.AllPlanSteps)
	approvals := durable(ctx, t, planner, events.StreamEvents, consumerApproval, "toolfleet.event.approval.requested.>")

	reply, err := planner.nc.Request(pickSubject, []byte(`{"input":"repeat after me"}`), 5*time.Second)
	if err != nil {
		t.Fatalf("planner: request pick: %v", err)
	}
	if string(reply.Data) != `["echo"]` {
		t.Fatalf("planner: pick answered %s", reply.Data)
	}

	if _, err := runs.Put(ctx, "run1", []byte(`{"step":1}`)); err != nil {
		t.Fatalf("planner: put run state: %v", err)
	}
	if e, err := runs.Get(ctx, "run1"); err != nil || string(e.Value()) != `{"step":1}` {
		t.Fatalf("planner: get run state: %v", err)
	}
	if _, err := planner.js.Publish(ctx, "toolfleet.plan.run1", []byte("step 1")); err != nil {
		t.Fatalf("planner: publish plan step: %v", err)
	}
	fetchAck(ctx, t, plan, "planner: plan step")

	callMsg, err := events.NewCall(events.CallOptions{Source: "/toolfleet/planner", ID: "call1", RunID: "run1"},
		events.Call{Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := planner.js.PublishMsg(ctx, callMsg); err != nil {
		t.Fatalf("planner: publish call: %v", err)
	}

	// The executor takes the call, stores its result (PubAck), then acks the call.
	batch, err := calls.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("executor: fetch: %v", err)
	}
	var got jetstream.Msg
	for m := range batch.Messages() {
		got = m
	}
	if got == nil {
		t.Fatalf("executor: no call delivered (%v)", batch.Error())
	}
	ce, err := events.DecodeCall(got, 0)
	if err != nil {
		t.Fatalf("executor: decode call: %v", err)
	}
	if err := got.InProgress(); err != nil {
		t.Fatalf("executor: in-progress ack: %v", err)
	}
	inflight, err := executor.js.KeyValue(ctx, events.BucketInflight)
	if err != nil {
		t.Fatalf("executor: open inflight: %v", err)
	}
	if _, err := inflight.Create(ctx, ce.ID, []byte("started")); err != nil {
		t.Fatalf("executor: inflight create: %v", err)
	}
	if _, err := inflight.Get(ctx, ce.ID); err != nil {
		t.Fatalf("executor: inflight get: %v", err)
	}
	// Fleet-wide limits: the executor creates the bucket, reads a key and changes it by
	// compare-and-set, as pkg/executor's limits do.
	limits, err := jsutil.EnsureLimits(ctx, executor.js, cfg)
	if err != nil {
		t.Fatalf("executor: ensure %s: %v", events.BucketLimits, err)
	}
	rev, err := limits.Create(ctx, "t.echo.acme", []byte(`{"x":1}`))
	if err != nil {
		t.Fatalf("executor: limits create: %v", err)
	}
	if _, err := limits.Update(ctx, "t.echo.acme", []byte(`{}`), rev); err != nil {
		t.Fatalf("executor: limits compare-and-set: %v", err)
	}
	if _, err := limits.Get(ctx, "t.echo.acme"); err != nil {
		t.Fatalf("executor: limits get: %v", err)
	}
	if _, err := jsutil.EnsureLimits(ctx, executor.js, cfg); err != nil {
		t.Fatalf("executor: ensure %s again: %v", events.BucketLimits, err)
	}
	parked, err := executor.js.KeyValue(ctx, events.BucketApprovals)
	if err != nil {
		t.Fatalf("executor: open approvals: %v", err)
	}
	if _, err := parked.Put(ctx, "echo."+ce.ID, got.Data()); err != nil {
		t.Fatalf("executor: park call: %v", err)
	}
	if err := parked.Delete(ctx, "echo."+ce.ID); err != nil {
		t.Fatalf("executor: unpark call: %v", err)
	}
	resMsg, err := events.NewResult("/toolfleet/executor", events.Result{Status: events.StatusOK,
		Output: ce.Call.Arguments, Attempts: 1, Executor: "executor-0", Validated: true,
		Tool: "echo", CallID: ce.ID, RunID: ce.RunIDOrSelf()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := executor.js.PublishMsg(ctx, resMsg); err != nil {
		t.Fatalf("executor: publish result: %v", err)
	}
	if err := got.DoubleAck(ctx); err != nil {
		t.Fatalf("executor: ack call: %v", err)
	}
	dle := events.Event{ID: "call2", Type: events.TypeDeadLetter, Source: "/toolfleet/executor", Time: time.Now()}
	if err := dle.SetData(events.DeadLetter{Reason: "max deliveries reached"}); err != nil {
		t.Fatal(err)
	}
	dl, err := events.Encode(events.DeadLetterSubject("echo"), dle)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := executor.js.PublishMsg(ctx, dl); err != nil {
		t.Fatalf("executor: publish dead letter: %v", err)
	}

	// The planner reads the result through its durable consumer.
	rm := fetchAck(ctx, t, results, "planner: result")
	_, res, err := events.DecodeResult(rm)
	if err != nil || res.CallID != "call1" || res.Status != events.StatusOK {
		t.Fatalf("planner: result %+v, %v", res, err)
	}

	// An approval round trip: executor asks, planner answers, executor reads the answer.
	reqSubj, _ := events.ApprovalRequestedSubject("", "echo", "call3")
	if _, err := executor.js.Publish(ctx, reqSubj, []byte(`{}`)); err != nil {
		t.Fatalf("executor: publish approval request: %v", err)
	}
	fetchAck(ctx, t, approvals, "planner: approval request")
	ansSubj, _ := events.ApprovalAnsweredSubject(events.Identity{}, "echo", "call3")
	if _, err := planner.js.Publish(ctx, ansSubj, []byte(`{"decision":"approve"}`)); err != nil {
		t.Fatalf("planner: publish approval answer: %v", err)
	}
	fetchAck(ctx, t, answers, "executor: approval answer")

	// A cancel: the planner publishes it (stored), every executor hears it on a core
	// subscription and can look it up in the events stream; the executor announces the
	// calls it starts and their progress as run events.
	cancels, err := executor.nc.SubscribeSync("toolfleet.event.cancel.echo.>")
	if err != nil {
		t.Fatalf("executor: subscribe to cancels: %v", err)
	}
	must(t, executor.nc.Flush())
	cancelMsg, err := events.NewCancel("/toolfleet/planner", events.Identity{}, "echo", "call4", events.Cancel{Reason: "run canceled"})
	must(t, err)
	if _, err := planner.js.PublishMsg(ctx, cancelMsg); err != nil {
		t.Fatalf("planner: publish a cancel: %v", err)
	}
	if m, err := cancels.NextMsg(5 * time.Second); err != nil || m.Subject != cancelMsg.Subject {
		t.Fatalf("executor: hear a cancel: %v", err)
	}
	if r, err := executor.nc.Request("$JS.API.DIRECT.GET."+events.StreamEvents, []byte(`{"last_by_subj":"`+cancelMsg.Subject+`"}`), 5*time.Second); err != nil || r.Header.Get("Status") != "" {
		t.Fatalf("executor: look a cancel up: %v", err)
	}
	for _, word := range []string{"tool_started", "tool_progress"} {
		m, err := events.NewRunEvent("/toolfleet/executor", word, events.RunEvent{RunID: "run1", Tenant: "acme", CallID: "call1", Tool: "echo"}, time.Time{})
		must(t, err)
		if _, err := executor.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("executor: publish %s: %v", word, err)
		}
		m.Subject, _ = events.RunEventSubject("", "run1", word)
		if _, err := executor.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("executor: publish %s of an anonymous run: %v", word, err)
		}
	}

	// Run lifecycle events, and the planner's SSE view of one run (an ordered consumer).
	runSubj, _ := events.RunEventSubject("", "run1", "done")
	if _, err := planner.js.Publish(ctx, runSubj, []byte(`{}`)); err != nil {
		t.Fatalf("planner: publish run event: %v", err)
	}
	sse, err := planner.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"toolfleet.event.run.run1.*"}})
	if err != nil {
		t.Fatalf("planner: ordered consumer of run events: %v", err)
	}
	if m, err := sse.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil || m.Subject() != runSubj {
		t.Fatalf("planner: run event stream: %v", err)
	}

	// Operators discover the picker through the micro control subjects.
	admin := srv.connect(t, "admin")
	ping, err := admin.nc.Request("$SRV.PING.toolfleet-picker", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("admin: discover the picker: %v", err)
	}
	if !json.Valid(ping.Data) {
		t.Fatalf("admin: picker ping answered %q", ping.Data)
	}

	// Stop and policy hooks are services of the user's own under hooks.*: the planner
	// (a run's hooks) and the executor (a tool's policy hook) may ask them.
	for _, c := range []*client{planner, executor} {
		if err := c.nc.Publish("hooks.policy", []byte(`{}`)); err != nil {
			t.Fatalf("%s: ask a hook: %v", c.user, err)
		}
	}

	for _, c := range []*client{executor, picker, admin} {
		c.noViolations()
	}
	planner.noViolations(refusedCleanup(events.StreamEvents))

	t.Run("executor", func(t *testing.T) {
		executor.t = t
		executor.denied("delete the calls stream", "$JS.API.STREAM.DELETE."+events.StreamCalls, func(ctx context.Context) error {
			return executor.js.DeleteStream(ctx, events.StreamCalls)
		})
		executor.denied("purge the results stream", "$JS.API.STREAM.PURGE."+events.StreamResults, func(ctx context.Context) error {
			s, err := executor.js.Stream(ctx, events.StreamResults)
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		})
		executor.denied("delete the planner's consumer", "$JS.API.CONSUMER.DELETE."+events.StreamResults+"."+consumerResults, func(ctx context.Context) error {
			return executor.js.DeleteConsumer(ctx, events.StreamResults, consumerResults)
		})
		executor.denied("open the run state bucket", "$JS.API.STREAM.INFO.KV_"+bucketRuns, func(ctx context.Context) error {
			_, err := executor.js.KeyValue(ctx, bucketRuns)
			return err
		})
		executor.denied("read a run's state directly", "$JS.API.DIRECT.GET.KV_"+bucketRuns+".$KV."+bucketRuns+".run1", func(ctx context.Context) error {
			_, err := executor.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+bucketRuns+".$KV."+bucketRuns+".run1", nil)
			return err
		})
		executor.denied("publish a call", "toolfleet.call.echo", func(ctx context.Context) error {
			_, err := executor.js.Publish(ctx, "toolfleet.call.echo", []byte(`{}`))
			return err
		})
		executor.denied("read run events through a consumer", "$JS.API.CONSUMER.CREATE."+events.StreamEvents+".spy.toolfleet.event.run.>", func(ctx context.Context) error {
			_, err := executor.js.CreateConsumer(ctx, events.StreamEvents, jetstream.ConsumerConfig{Name: "spy", FilterSubject: "toolfleet.event.run.>"})
			return err
		})
		executor.denied("read every result through a consumer", "$JS.API.CONSUMER.CREATE."+events.StreamResults+".spy.toolfleet.result.>", func(ctx context.Context) error {
			_, err := executor.js.CreateConsumer(ctx, events.StreamResults, jetstream.ConsumerConfig{Name: "spy", FilterSubject: events.AllResults})
			return err
		})
		doneSubj, _ := events.RunEventSubject("", "run1", "done")
		executor.denied("announce the end of a run", doneSubj, func(ctx context.Context) error {
			_, err := executor.js.Publish(ctx, doneSubj, []byte(`{}`))
			return err
		})
		cancelSubj, _ := events.CancelSubject(events.Identity{}, "echo", "call5")
		executor.denied("cancel a call", cancelSubj, func(ctx context.Context) error {
			_, err := executor.js.Publish(ctx, cancelSubj, []byte(`{}`))
			return err
		})
		executor.denied("answer its own approvals", ansSubj, func(ctx context.Context) error {
			_, err := executor.js.Publish(ctx, ansSubj, []byte(`{"decision":"approve"}`))
			return err
		})
	})

	t.Run("planner", func(t *testing.T) {
		planner.t = t
		planner.denied("put a tool in the catalog", "$KV.toolfleet-catalog.evil", func(ctx context.Context) error {
			_, err := planner.js.Publish(ctx, "$KV.toolfleet-catalog.evil", []byte(`{}`))
			return err
		})
		planner.denied("read the in-flight bucket", "$JS.API.DIRECT.GET.KV_"+events.BucketInflight+".$KV."+events.BucketInflight+".call1", func(ctx context.Context) error {
			_, err := planner.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+events.BucketInflight+".$KV."+events.BucketInflight+".call1", nil)
			return err
		})
		planner.denied("read the limits bucket", "$JS.API.DIRECT.GET.KV_"+events.BucketLimits+".$KV."+events.BucketLimits+".t.echo.acme", func(ctx context.Context) error {
			_, err := planner.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+events.BucketLimits+".$KV."+events.BucketLimits+".t.echo.acme", nil)
			return err
		})
		planner.denied("take a tenant's slots", "$KV."+events.BucketLimits+".t.echo.acme", func(ctx context.Context) error {
			_, err := planner.js.Publish(ctx, "$KV."+events.BucketLimits+".t.echo.acme", []byte(`{}`))
			return err
		})
		planner.denied("create the limits bucket", "$JS.API.STREAM.CREATE.KV_"+events.BucketLimits, func(ctx context.Context) error {
			_, err := planner.js.CreateKeyValue(ctx, cfg.LimitsBucket())
			return err
		})
		planner.denied("dead-letter a call", "toolfleet.dlq.echo", func(ctx context.Context) error {
			_, err := planner.js.Publish(ctx, "toolfleet.dlq.echo", []byte(`{}`))
			return err
		})
		planner.denied("request an approval as if it were an executor", reqSubj, func(ctx context.Context) error {
			_, err := planner.js.Publish(ctx, reqSubj, []byte(`{}`))
			return err
		})
		planner.denied("consume a tool's calls", "$JS.API.CONSUMER.CREATE."+events.StreamCalls+"."+events.ConsumerName("echo"), func(ctx context.Context) error {
			_, err := planner.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, callCfg)
			return err
		})
		planner.denied("delete the calls stream", "$JS.API.STREAM.DELETE."+events.StreamCalls, func(ctx context.Context) error {
			return planner.js.DeleteStream(ctx, events.StreamCalls)
		})
	})

	t.Run("picker", func(t *testing.T) {
		picker.t = t
		picker.denied("publish a call", "toolfleet.call.echo", func(ctx context.Context) error {
			_, err := picker.js.Publish(ctx, "toolfleet.call.echo", []byte(`{}`))
			return err
		})
		picker.denied("publish a result", "toolfleet.result.run1.call9", func(ctx context.Context) error {
			_, err := picker.js.Publish(ctx, "toolfleet.result.run1.call9", []byte(`{}`))
			return err
		})
		picker.denied("reset a tool's rate", "$KV."+events.BucketLimits+".r.echo", func(ctx context.Context) error {
			_, err := picker.js.Publish(ctx, "$KV."+events.BucketLimits+".r.echo", []byte(`0`))
			return err
		})
		picker.denied("change the catalog", "$KV.toolfleet-catalog.echo", func(ctx context.Context) error {
			_, err := picker.js.Publish(ctx, "$KV.toolfleet-catalog.echo", []byte(`{}`))
			return err
		})
		picker.denied("create the streams", "$JS.API.STREAM.CREATE."+events.StreamCalls, func(ctx context.Context) error {
			_, err := picker.js.CreateStream(ctx, cfg.Streams()[0])
			return err
		})
	})

	t.Run("client", func(t *testing.T) {
		cl := srv.connect(t, "client")
		msg, err := events.NewCall(events.CallOptions{Source: "/cli", ID: "call4", RunID: "run4"}, events.Call{Tool: "echo", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.js.PublishMsg(ctx, msg); err != nil {
			t.Fatalf("client: publish call: %v", err)
		}
		oc, err := cl.js.OrderedConsumer(ctx, events.StreamResults, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"toolfleet.result.run1.*"}})
		if err != nil {
			t.Fatalf("client: ordered consumer of a run's results: %v", err)
		}
		if m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil || m.Subject() != "toolfleet.result.run1.call1" {
			t.Fatalf("client: read result: %v", err)
		}
		cl.noViolations(refusedCleanup(events.StreamResults))
		cl.denied("publish a result", "toolfleet.result.run4.call4", func(ctx context.Context) error {
			_, err := cl.js.Publish(ctx, "toolfleet.result.run4.call4", []byte(`{}`))
			return err
		})
		cl.denied("free a tenant's slots", "$KV."+events.BucketLimits+".t.echo.acme", func(ctx context.Context) error {
			_, err := cl.js.Publish(ctx, "$KV."+events.BucketLimits+".t.echo.acme", []byte(`{}`))
			return err
		})
		cl.denied("consume a tool's calls", "$JS.API.CONSUMER.CREATE."+events.StreamCalls+"."+events.ConsumerName("echo"), func(ctx context.Context) error {
			_, err := cl.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, callCfg)
			return err
		})
		// Identities are for the tenants' users: the shared client can claim none.
		claim, err := events.NewCall(events.CallOptions{Source: "/cli", ID: "call5", Caller: events.Identity{Tenant: "acme", Role: "admin"}},
			events.Call{Tool: "echo", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		cl.denied("call with a tenant's identity", claim.Subject, func(ctx context.Context) error {
			_, err := cl.js.PublishMsg(ctx, claim)
			return err
		})
		ans, err := events.NewApprovalAnswer("/cli", events.Identity{Tenant: "acme", Role: "admin"}, "echo", "call5", events.ApprovalAnswer{Decision: events.DecisionApprove})
		if err != nil {
			t.Fatal(err)
		}
		cl.denied("answer a tenant's approval", ans.Subject, func(ctx context.Context) error {
			_, err := cl.js.PublishMsg(ctx, ans)
			return err
		})
	})

	t.Run("authentication", func(t *testing.T) {
		for _, tc := range []struct{ name, user, password string }{
			{"wrong password", "executor", "planner-secret"},
			{"unknown user", "mallory", "x"},
			{"no credentials", "", ""},
		} {
			opts := []nats.Option{nats.MaxReconnects(0)}
			if tc.user != "" {
				opts = append(opts, nats.UserInfo(tc.user, tc.password))
			}
			nc, err := nats.Connect(srv.srv.ClientURL(), opts...)
			if err == nil {
				nc.Close()
				t.Errorf("%s: connected", tc.name)
			} else if !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("%s: %v, want an authorization error", tc.name, err)
			}
		}
	})
}

// durable creates (as the planner does) a durable pull consumer with one filter.
func durable(ctx context.Context, t *testing.T, c *client, stream, name, filter string) jetstream.Consumer {
	t.Helper()
	cons, err := c.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name,
		FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("%s: create consumer %s on %s: %v", c.user, name, stream, err)
	}
	return cons
}

// fetchAck takes one message from cons and acks it (waiting for the server's ack).
func fetchAck(ctx context.Context, t *testing.T, cons jetstream.Consumer, what string) jetstream.Msg {
	t.Helper()
	m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("%s: fetch: %v", what, err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatalf("%s: ack: %v", what, err)
	}
	return m
}

// next waits for one catalog change.
func next(t *testing.T, ch <-chan jsutil.CatalogChange) jsutil.CatalogChange {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("catalog watch ended")
		}
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no catalog change within 5s")
	}
	return jsutil.CatalogChange{}
}

// A planner started on the stores of an earlier version copies its run log
// (TOOLFLEET_RUNLOG) into the journal under its own user: the migration's stream updates,
// reads and the copy are allowed by auth.conf, and the copied record is readable.
func TestPlannerMigratesTheOldRunLogUnderItsUser(t *testing.T) {
	srv := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cfg := events.DefaultConfig()
	planner := srv.connect(t, "planner")

	// What an earlier planner made under the same user: a plain runs bucket and its run log.
	if _, err := planner.js.CreateKeyValue(ctx, cfg.RunsBucket()); err != nil {
		t.Fatalf("planner: old runs bucket: %v", err)
	}
	c := cfg.WithDefaults()
	if _, err := planner.js.CreateStream(ctx, jetstream.StreamConfig{Name: events.StreamRunLog,
		Subjects: []string{events.AllRunLog}, Storage: jetstream.FileStorage, Replicas: c.Replicas,
		MaxAge: c.RunsMaxAge.D() + 24*time.Hour, Discard: jetstream.DiscardOld, AllowDirect: true}); err != nil {
		t.Fatalf("planner: old run log: %v", err)
	}
	if _, err := planner.js.Publish(ctx, "toolfleet.runlog.r1.input", []byte(`[{"role":"user","text":"hi"}]`)); err != nil {
		t.Fatalf("planner: old record: %v", err)
	}

	if _, err := jsutil.EnsurePlanner(ctx, planner.js, cfg); err != nil {
		t.Fatalf("planner: EnsurePlanner over the old run log: %v", err)
	}
	journal, err := planner.js.Stream(ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := journal.GetLastMsgForSubject(ctx, "toolfleet.runlog.r1.input"); err != nil || string(m.Data) != `[{"role":"user","text":"hi"}]` {
		t.Fatalf("planner: the copied record: %v, %v", m, err)
	}
	if retired, err := jsutil.RunLogRetired(ctx, planner.js); err != nil || !retired {
		t.Fatalf("planner: RunLogRetired = %v, %v; want true", retired, err)
	}
}
