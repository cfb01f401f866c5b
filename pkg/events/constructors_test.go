package events_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Every event type has a constructor and a decoder that agree; the ids any caller may
// use (here a URN) are carried back as the contract says.
func TestConstructorsRoundTrip(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	call, err := events.NewCall(events.CallOptions{Source: "/me", ID: "urn:uuid:1", RunID: "run 1", Deadline: deadline,
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		events.Call{Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	ce, err := events.DecodeCall(events.CoreMsg(call), 0)
	if err != nil || ce.ID != "urn:uuid:1" || ce.RunID != "run 1" || !ce.Deadline.Equal(deadline) || ce.TraceParent == "" || ce.Call.Tool != "echo" {
		t.Fatalf("call decoded as %+v, %v", ce, err)
	}
	if a := ce.Answer(); a.Tool != "echo" || a.CallID != "urn:uuid:1" || a.RunID != "run 1" {
		t.Errorf("Answer = %+v", a)
	}
	if _, err := events.NewCall(events.CallOptions{Source: "/me"}, events.Call{Tool: "echo"}); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("call without an id: %v", err)
	}

	req, err := events.NewApprovalRequest("/ex", events.ApprovalRequest{Tool: "write_file", CallID: "c1", RunID: "r1",
		Arguments: json.RawMessage(`{}`), Reason: "unsafe"}, "")
	if err != nil {
		t.Fatal(err)
	}
	e, r, err := events.DecodeApprovalRequest(events.CoreMsg(req))
	if err != nil || e.ID != "c1" || e.RunID != "r1" || r.AnswerSubject != "toolfleet.event.approval.answered.write_file.c1" ||
		req.Subject != "toolfleet.event.approval.requested.write_file.c1" {
		t.Errorf("approval request %s decoded as %+v %+v, %v", req.Subject, e, r, err)
	}

	ev, err := events.NewRunEvent("/planner", "tool_called", events.RunEvent{RunID: "r1", Step: 2, CallID: "c1"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	e, what, re, err := events.DecodeRunEvent(events.CoreMsg(ev))
	if err != nil || what != "tool_called" || e.ID != "r1-tool_called-c1" || e.Type != events.RunType("tool_called") || re.Step != 2 {
		t.Errorf("run event decoded as %+v %s %+v, %v", e, what, re, err)
	}
	done, _ := events.NewRunEvent("/planner", "done", events.RunEvent{RunID: "r1", Step: 3}, time.Time{})
	if id := done.Header.Get(events.HeaderID); id != "r1-done-3" {
		t.Errorf("done event id %s", id)
	}

	step, err := events.NewPlanStep("/planner", "r1", 4, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	e, ps, err := events.DecodePlanStep(events.CoreMsg(step))
	if err != nil || e.ID != "r1-4" || e.RunID != "r1" || ps.Step != 4 {
		t.Errorf("plan step decoded as %+v %+v, %v", e, ps, err)
	}
	step.Header.Del(events.HeaderRunID)
	if _, _, err := events.DecodePlanStep(events.CoreMsg(step)); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("plan step without a run id: %v", err)
	}

	dl, err := events.NewDeadLetter("/ex", "", events.DeadLetter{Reason: "no id", Tool: "echo"},
		events.CoreMsg(&nats.Msg{Subject: "toolfleet.call.echo", Data: []byte(`{}`)}), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, d, err := events.DecodeDeadLetter(events.CoreMsg(dl)); err != nil || d.Reason != "no id" || string(d.Body) != `{}` || d.Subject != "toolfleet.call.echo" {
		t.Errorf("dead letter decoded as %+v, %v", d, err)
	}

	ans, _ := events.NewApprovalAnswer("/me", events.Identity{}, "write_file", "c1", events.ApprovalAnswer{Decision: events.DecisionApprove})
	if _, a, err := events.DecodeApprovalAnswer(events.CoreMsg(ans), 0); err != nil || a.Decision != events.DecisionApprove {
		t.Errorf("answer decoded as %+v, %v", a, err)
	}
	ans.Data = []byte(`{"decision":"maybe"}`)
	if _, _, err := events.DecodeApprovalAnswer(events.CoreMsg(ans), 0); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("answer with decision maybe: %v", err)
	}
}

// The planner's consumers and the picker's bucket have their one home in Config.
func TestPlannerConsumerAndEmbeddings(t *testing.T) {
	t.Parallel()
	cfg := events.Config{AckWait: tools.Duration(7 * time.Second)}
	for name, want := range map[string]string{events.PlannerStepsConsumer: events.StreamPlan,
		events.PlannerResultsConsumer: events.StreamResults, events.PlannerApprovalsConsumer: events.StreamEvents} {
		streams, cc, err := cfg.PlannerConsumer(name)
		if err != nil || len(streams) != 1 || streams[0] != want || cc.Durable != name || cc.AckWait != 7*time.Second || cc.MaxDeliver != -1 {
			t.Errorf("PlannerConsumer(%s) = %s, %+v, %v", name, streams, cc, err)
		}
	}
	sharded := cfg
	sharded.Shards = 3
	if streams, _, _ := sharded.PlannerConsumer(events.PlannerResultsConsumer); !slices.Equal(streams, []string{"TOOLFLEET_RESULTS_0", "TOOLFLEET_RESULTS_1", "TOOLFLEET_RESULTS_2"}) {
		t.Errorf("PlannerConsumer(results) with 3 shards: streams %v", streams)
	}
	if _, _, err := cfg.PlannerConsumer("nope"); err == nil {
		t.Error("PlannerConsumer(nope): no error")
	}
	if kc := cfg.EmbeddingsBucket(); kc.Bucket != events.BucketEmbeddings || kc.Replicas != 1 {
		t.Errorf("EmbeddingsBucket = %+v", kc)
	}
}
