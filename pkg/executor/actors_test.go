package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
)

// Who may act on a call over NATS: the call's owner's role, and the operator roles of
// its tenant (events.MayAct), whatever an answer or a cancel writes about itself.

var (
	acmeAdmin = events.Identity{Tenant: "acme", Role: "admin"}
	acmeUser  = events.Identity{Tenant: "acme", Role: "user"}
	acmeOps   = events.Identity{Tenant: "acme", Role: "ops"}
	globex    = events.Identity{Tenant: "globex", Role: "admin"}
)

// refusal waits for the next act_refused run event on sub and returns its detail.
func refusal(t testing.TB, sub *nats.Subscription) (events.RunEvent, events.RefusedAct) {
	t.Helper()
	m, err := sub.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no act_refused event: %v", err)
	}
	_, what, r, err := events.DecodeRunEvent(events.CoreMsg(m))
	if err != nil || what != events.RunActRefused {
		t.Fatalf("act_refused event %s: %v", what, err)
	}
	var act events.RefusedAct
	must(t, json.Unmarshal(r.Detail, &act))
	return r, act
}

func (b *testBundle) answerAs(t testing.TB, who events.Identity, tool, callID string, ans events.ApprovalAnswer) {
	t.Helper()
	m, err := events.NewApprovalAnswer("/human", who, tool, callID, ans)
	must(t, err)
	b.publish(t, m)
}

// answersProcessed waits until the executors have taken every approval answer of tool
// published so far (acked or terminated).
func (b *testBundle) answersProcessed(t testing.TB, tool string) {
	t.Helper()
	natstest.Eventually(t, 15*time.Second, "the answers to be processed", func() bool {
		cons, err := b.js.Consumer(context.Background(), events.StreamEvents, events.ApprovalConsumerName(tool))
		if err != nil {
			return false
		}
		ci, err := cons.Info(context.Background())
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	})
}

// acme's user answers acme's admin's parked call over NATS, with replacement arguments
// and a by that names the admin: the executor refuses it (the call keeps waiting, the
// refusal is logged, counted and recorded on the run); the admin's own answer runs the
// call and the result says it was the admin, whatever its by said; an operator role
// answers too; another tenant's answer finds nothing.
func TestApprovalFromAnotherRoleIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	promReg := prometheus.NewRegistry()
	b.start(t, writeRegistry(t, &written), executor.WithApprovalTimeout(time.Minute),
		executor.WithOperatorRoles("ops"), executor.WithMetrics(promReg))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*.*")
	refusals := subscribe(t, b, "toolfleet.event.run.*."+events.RunActRefused+".*")

	b.callAsArgs(t, acmeAdmin, "write_file", "w-admin", `{"path":"a.txt","text":"hi"}`)
	awaitRequest(t, requests)
	b.answerAs(t, acmeUser, "write_file", "w-admin", events.ApprovalAnswer{Decision: events.DecisionApprove,
		Arguments: json.RawMessage(`{"path":"/etc/passwd","text":"owned"}`), By: "acme/admin"})
	r, act := refusal(t, refusals)
	if r.RunID != "r" || r.CallID != "w-admin" || r.Tool != "write_file" || act.Act != events.ActApprovalAnswer ||
		act.Actor != acmeUser || act.Owner != acmeAdmin || !strings.Contains(act.Message, `role "user" may not answer the approvals of call w-admin`) {
		t.Fatalf("refusal %+v %+v", r, act)
	}
	b.answersProcessed(t, "write_file")
	if _, ran := written.Load("w-admin"); ran || b.results.count("w-admin") != 0 {
		t.Fatalf("acme's user's answer ran acme's admin's call (results: %d)", b.results.count("w-admin"))
	}
	natstest.Eventually(t, 5*time.Second, "the refusal counted", func() bool {
		return opstest.Metrics(t, promReg)[`toolfleet_executor_refused_acts_total{act="approval_answer",tool="write_file"}`] == 1
	})

	// The owner's answer runs the call as it was asked; the record names the owner.
	b.answerAs(t, acmeAdmin, "write_file", "w-admin", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "mallory"})
	res := b.results.one(t, "w-admin")
	if w, _ := written.Load("w-admin"); res.Status != events.StatusOK || w != "a.txt=hi" {
		t.Fatalf("after the admin's answer: %+v, wrote %v", res, w)
	}
	if a := res.Approval; a == nil || a.By != "acme/admin" || a.ClaimedBy != "mallory" {
		t.Fatalf("approval record %+v; want by acme/admin (claimed: mallory)", a)
	}

	// An operator role of the tenant answers another role's call.
	b.callAsArgs(t, acmeAdmin, "write_file", "w-ops", `{"path":"b.txt","text":"hi"}`)
	awaitRequest(t, requests)
	b.answerAs(t, acmeOps, "write_file", "w-ops", events.ApprovalAnswer{Decision: events.DecisionDeny, Reason: "not today"})
	res = b.results.one(t, "w-ops")
	if res.Status != events.StatusDenied || res.Approval == nil || res.Approval.By != "acme/ops" ||
		!strings.Contains(res.Error.Message, "denied by acme/ops: not today") {
		t.Fatalf("the operator's answer: %+v (approval %+v)", res.Error, res.Approval)
	}

	// Another tenant's answer, on its own subject, finds nothing: the call keeps waiting.
	b.callAsArgs(t, acmeAdmin, "write_file", "w-g", `{"path":"c.txt","text":"hi"}`)
	awaitRequest(t, requests)
	b.answerAs(t, globex, "write_file", "w-g", events.ApprovalAnswer{Decision: events.DecisionApprove})
	b.answersProcessed(t, "write_file")
	if b.results.count("w-g") != 0 {
		t.Fatal("another tenant's answer answered acme's call")
	}
	b.answerAs(t, acmeAdmin, "write_file", "w-g", events.ApprovalAnswer{Decision: events.DecisionDeny})
	if res := b.results.one(t, "w-g"); res.Status != events.StatusDenied || res.Approval.By != "acme/admin" {
		t.Fatalf("w-g: %+v %+v", res, res.Approval)
	}
}

func (b *testBundle) callAsArgs(t testing.TB, caller events.Identity, tool, callID, args string) {
	t.Helper()
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: callID, RunID: "r", Caller: caller},
		events.Call{Tool: tool, Arguments: json.RawMessage(args)})
	must(t, err)
	b.publish(t, m)
}

// acme's user cancels acme's admin's running call over NATS: refused (the call goes on
// and finishes ok), as is a cancel of the shape before roles, whose sender is unknown;
// the admin's cancel, and an operator's, stop the calls they name, and the result says
// who canceled. A refused cancel stored before its call is delivered does not stop it
// either.
func TestCancelFromAnotherRoleIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSlowTools(t)
	promReg := prometheus.NewRegistry()
	b.start(t, s.reg, executor.WithOperatorRoles("ops"), executor.WithMetrics(promReg))
	refusals := subscribe(t, b, "toolfleet.event.run.*."+events.RunActRefused+".*")

	b.callAs(t, acmeAdmin, "slow", "keep")
	s.awaitStart(t, "acme/keep")
	old, err := events.NewCancel("/old", events.Identity{}, "slow", "keep", events.Cancel{})
	must(t, err)
	old.Subject += ".acme" // the cancel subject before roles
	b.publish(t, old)
	b.cancel(t, acmeUser, "slow", "keep") // heard after the old-shape one: one publisher, in order
	r, act := refusal(t, refusals)
	if r.CallID != "keep" || act.Act != events.ActCancel || act.Actor != acmeUser || act.Owner != acmeAdmin ||
		!strings.Contains(act.Message, `role "user" may not cancel call keep`) {
		t.Fatalf("refusal %+v %+v", r, act)
	}
	if n := s.sawEnd.Load(); n != 0 || b.results.count("keep") != 0 {
		t.Fatalf("a refused cancel stopped the call (%d contexts ended, %d results)", n, b.results.count("keep"))
	}

	b.callAs(t, acmeAdmin, "slow", "stop")
	s.awaitStart(t, "acme/stop")
	b.cancel(t, acmeAdmin, "slow", "stop")
	res := b.results.one(t, "stop")
	wantCanceled(t, res, events.StatusCanceled, "canceled")
	if !strings.Contains(res.Error.Message, "canceled by acme/admin") {
		t.Errorf("canceled by whom: %s", res.Error.Message)
	}
	b.callAs(t, acmeAdmin, "slow", "by-ops")
	s.awaitStart(t, "acme/by-ops")
	b.cancel(t, acmeOps, "slow", "by-ops")
	if res := b.results.one(t, "by-ops"); res.Status != events.StatusCanceled || !strings.Contains(res.Error.Message, "canceled by acme/ops") {
		t.Errorf("the operator's cancel: %+v", res.Error)
	}

	// Stored before the call comes: found by the look-up before it runs, refused.
	b.cancel(t, acmeUser, "slow", "later")
	b.callAs(t, acmeAdmin, "slow", "later")
	if _, act := refusal(t, refusals); act.Actor != acmeUser || act.Owner != acmeAdmin {
		t.Fatalf("refusal of the stored cancel: %+v", act)
	}
	s.awaitStart(t, "acme/later")
	close(s.release)
	for _, id := range []string{"keep", "later"} {
		if res := b.results.one(t, id); res.Status != events.StatusOK {
			t.Errorf("%s after a refused cancel: %+v", id, res.Error)
		}
	}
	natstest.Eventually(t, 5*time.Second, "the refusals counted", func() bool {
		return opstest.Metrics(t, promReg)[`toolfleet_executor_refused_acts_total{act="cancel",tool="slow"}`] == 2
	})
}

// heldDialer dials the server unless held: a connection it made, once cut, stays cut
// until it is released.
type heldDialer struct{ held atomic.Bool }

func (d *heldDialer) Dial(network, address string) (net.Conn, error) {
	if d.held.Load() {
		return nil, errors.New("held by the test")
	}
	return net.Dial(network, address)
}

// A cancel whose message the executor running the call never hears — published while its
// connection is down — still stops the call: the executor looks the call's cancels up
// again while it holds it. Before, such a call ran to its end, and the caller got ok.
func TestCancelWhoseMessageIsMissed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSlowTools(t)
	d := &heldDialer{}
	nc := b.srv.Connect(nats.SetCustomDialer(d))
	b.startOn(t, nc, s.reg)

	b.callAs(t, acmeAdmin, "slow", "missed")
	s.awaitStart(t, "acme/missed")
	cid, err := nc.GetClientID()
	must(t, err)
	d.held.Store(true)
	must(t, b.srv.Server().DisconnectClientByID(cid))
	natstest.Eventually(t, 10*time.Second, "the executor's connection down", func() bool { return !nc.IsConnected() })
	b.cancel(t, acmeAdmin, "slow", "missed") // stored; no subscription of the executor hears it
	d.held.Store(false)
	res := b.results.one(t, "missed")
	wantCanceled(t, res, events.StatusCanceled, "canceled")
	if !strings.Contains(res.Error.Message, "canceled by acme/admin") {
		t.Errorf("canceled by whom: %s", res.Error.Message)
	}
}

// A cancel of a call parked for approval whose message the executor never hears —
// published while its connection is down — still answers the call canceled, at the next
// sweep of the approvals, long before the approval expires; a missed cancel from a role
// that may not cancel the call is refused there (recorded on the run), and the call
// keeps waiting for its owner's answer. Before, a parked call's missed cancel was acted
// on only when an answer came: the call waited for its answer or its expiry.
func TestCancelOfAParkedCallWhoseMessageIsMissed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	d := &heldDialer{}
	nc := b.srv.Connect(nats.SetCustomDialer(d))
	b.startOn(t, nc, writeRegistry(t, &written), executor.WithApprovalTimeout(time.Hour))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*.*")
	refusals := subscribe(t, b, "toolfleet.event.run.*."+events.RunActRefused+".*")
	b.callAsArgs(t, acmeAdmin, "write_file", "parked-missed", `{"path":"a.txt","text":"hi"}`)
	awaitRequest(t, requests)
	b.callAsArgs(t, acmeAdmin, "write_file", "parked-kept", `{"path":"b.txt","text":"hi"}`)
	awaitRequest(t, requests)

	cid, err := nc.GetClientID()
	must(t, err)
	d.held.Store(true)
	must(t, b.srv.Server().DisconnectClientByID(cid))
	natstest.Eventually(t, 10*time.Second, "the executor's connection down", func() bool { return !nc.IsConnected() })
	b.cancel(t, acmeAdmin, "write_file", "parked-missed") // stored; no subscription of the executor hears them
	b.cancel(t, acmeUser, "write_file", "parked-kept")
	d.held.Store(false)

	res := b.results.one(t, "parked-missed")
	wantCanceled(t, res, events.StatusCanceled, "canceled")
	if !strings.Contains(res.Error.Message, "canceled by acme/admin") {
		t.Errorf("canceled by whom: %s", res.Error.Message)
	}
	if _, act := refusal(t, refusals); act.Actor != acmeUser || act.Owner != acmeAdmin || act.Act != events.ActCancel {
		t.Fatalf("refusal of the missed cancel: %+v", act)
	}
	b.answerAs(t, acmeAdmin, "write_file", "parked-kept", events.ApprovalAnswer{Decision: events.DecisionApprove})
	if res := b.results.one(t, "parked-kept"); res.Status != events.StatusOK {
		t.Fatalf("the call whose only cancel was refused: %+v", res.Error)
	}
	if _, ran := written.Load("parked-missed"); ran {
		t.Fatal("the canceled parked call ran")
	}
}
