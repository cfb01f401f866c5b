package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// writeRegistry serves write_file, an unsafe tool that needs approval, and records what
// it wrote.
func writeRegistry(t testing.TB, written *sync.Map) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]}`)
	must(t, reg.AddFunc(tools.Definition{Name: "write_file", Parameters: schema, Safe: false},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			var a struct{ Path, Text string }
			_ = json.Unmarshal(args, &a)
			info, _ := tools.CallInfoFrom(ctx)
			written.Store(info.CallID, a.Path+"="+a.Text)
			return map[string]string{"wrote": a.Path}, nil
		}))
	return reg
}

// awaitRequest waits for the approval request of a call.
func awaitRequest(t testing.TB, sub *nats.Subscription) events.ApprovalRequest {
	t.Helper()
	m, err := sub.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no approval request: %v", err)
	}
	e, err := events.Decode(events.CoreMsg(m), 0)
	if err != nil {
		t.Fatal(err)
	}
	var req events.ApprovalRequest
	must(t, e.DataAs(&req))
	return req
}

func (b *testBundle) answer(t testing.TB, req events.ApprovalRequest, ans events.ApprovalAnswer) {
	t.Helper()
	m, err := events.NewApprovalAnswer("/human", events.Identity{}, req.Tool, req.CallID, ans)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != req.AnswerSubject {
		t.Fatalf("answer subject %s, the request said %s", m.Subject, req.AnswerSubject)
	}
	b.publish(t, m)
}

func TestApprovals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	b.start(t, writeRegistry(t, &written), executor.WithApprovalTimeout(time.Minute))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")

	tests := []struct {
		name   string
		args   string
		answer events.ApprovalAnswer
		status events.Status
		wrote  string
		text   string
	}{
		{"approve", `{"path":"a.txt","text":"hi"}`, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ann"},
			events.StatusOK, "a.txt=hi", ""},
		{"deny", `{"path":"b.txt","text":"hi"}`, events.ApprovalAnswer{Decision: events.DecisionDeny, Reason: "not in /tmp", By: "ann"},
			events.StatusDenied, "", "denied by anonymous: not in /tmp"},
		{"modify", `{"path":"/etc/passwd","text":"x"}`, events.ApprovalAnswer{Decision: events.DecisionApprove,
			Arguments: json.RawMessage(`{"path":"safe.txt","text":"x"}`)}, events.StatusOK, "safe.txt=x", ""},
		{"modify invalid", `{"path":"c.txt","text":"x"}`, events.ApprovalAnswer{Decision: events.DecisionApprove,
			Arguments: json.RawMessage(`{"path":"c.txt"}`)}, events.StatusInvalid, "", "text"},
	}
	for i, tt := range tests {
		id := "w" + string(rune('0'+i))
		b.call(t, "write_file", id, "run-a", tt.args)
		req := awaitRequest(t, requests)
		if req.CallID != id || req.Tool != "write_file" || string(req.Arguments) != tt.args || req.RunID != "run-a" ||
			!strings.Contains(req.Reason, "not marked safe") || req.ExpiresAt.IsZero() {
			t.Fatalf("%s: request %+v", tt.name, req)
		}
		if _, ran := written.Load(id); ran {
			t.Fatalf("%s: the tool ran before approval", tt.name)
		}
		b.answer(t, req, tt.answer)
		r := b.results.one(t, id)
		if r.Status != tt.status {
			t.Errorf("%s: status %s, want %s (%+v)", tt.name, r.Status, tt.status, r.Error)
		}
		if tt.text != "" && (r.Error == nil || !strings.Contains(r.Error.Message, tt.text)) {
			t.Errorf("%s: error %+v, want it to mention %q", tt.name, r.Error, tt.text)
		}
		got, _ := written.Load(id)
		if tt.wrote == "" && got != nil || tt.wrote != "" && got != tt.wrote {
			t.Errorf("%s: wrote %v, want %q", tt.name, got, tt.wrote)
		}
		// The result records the decision, who answered (the answer's subject names an
		// anonymous answerer; what its by said is kept beside), and the original
		// arguments beside the approved ones when they were modified.
		a := r.Approval
		if a == nil || a.Decision != tt.answer.Decision || a.By != "anonymous" || a.ClaimedBy != tt.answer.By || a.Reason != tt.answer.Reason || a.At.IsZero() {
			t.Errorf("%s: approval record %+v", tt.name, a)
		} else if modified := len(tt.answer.Arguments) > 0; modified &&
			(string(a.ArgumentsOriginal) != tt.args || string(a.ArgumentsApproved) != string(tt.answer.Arguments)) ||
			!modified && (a.ArgumentsOriginal != nil || a.ArgumentsApproved != nil) {
			t.Errorf("%s: approval record arguments %s → %s", tt.name, a.ArgumentsOriginal, a.ArgumentsApproved)
		}
	}

	// Two different answers to one call: JetStream keeps the first (same answer id),
	// and only that one is carried out.
	b.call(t, "write_file", "twice", "run-a", `{"path":"t","text":"t"}`)
	twice := awaitRequest(t, requests)
	b.answer(t, twice, events.ApprovalAnswer{Decision: events.DecisionDeny, By: "bob"})
	second, err := events.NewApprovalAnswer("/human", events.Identity{}, "write_file", "twice", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "eve"})
	must(t, err)
	ack, err := b.js.PublishMsg(context.Background(), second)
	if err != nil || !ack.Duplicate {
		t.Errorf("second answer: ack %+v, err %v; want it dropped as a duplicate", ack, err)
	}
	if r := b.results.one(t, "twice"); r.Status != events.StatusDenied || r.Approval == nil || r.Approval.ClaimedBy != "bob" {
		t.Errorf("two answers: %+v %+v", r, r.Approval)
	}
	if _, ran := written.Load("twice"); ran {
		t.Error("two answers: the tool ran although the first answer denied it")
	}
	// A call whose id is no subject token (a URN) is parked, asked for and answered at
	// the id's token, and its result carries the id.
	urn := "urn:uuid:0b7e3a9e-approve"
	b.call(t, "write_file", urn, "run-a", `{"path":"u.txt","text":"u"}`)
	req := awaitRequest(t, requests)
	if req.CallID != urn || !strings.HasSuffix(req.AnswerSubject, "."+events.IDToken(urn)) {
		t.Fatalf("request for a URN id: %+v", req)
	}
	b.answer(t, req, events.ApprovalAnswer{Decision: events.DecisionApprove})
	if r := b.results.one(t, urn); r.Status != events.StatusOK || r.CallID != urn {
		t.Errorf("URN id: %+v %+v", r, r.Error)
	}
	if got, _ := written.Load(urn); got != "u.txt=u" {
		t.Errorf("URN id: wrote %v", got)
	}

	// A second answer to an answered call changes nothing, even past JetStream's
	// duplicate window (played here by an answer with an id of its own).
	late, err := events.NewApprovalAnswer("/human", events.Identity{}, "write_file", "w0", events.ApprovalAnswer{Decision: events.DecisionDeny})
	must(t, err)
	late.Header.Set(events.HeaderID, "late-answer")
	late.Header.Set(events.HeaderMsgID, "late-answer")
	b.publish(t, late)
	b.call(t, "write_file", "sync", "run-a", `{"path":"s","text":"s"}`)
	b.answer(t, awaitRequest(t, requests), events.ApprovalAnswer{Decision: events.DecisionApprove})
	b.results.one(t, "sync")
	if n := b.results.count("w0"); n != 1 {
		t.Errorf("w0 has %d results after a late second answer", n)
	}
}

// A call waiting for approval survives the executor: a new replica carries out the
// answer; and an approval that never comes ends as denied.
func TestApprovalSurvivesRestartAndExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")
	stop := b.start(t, writeRegistry(t, &written), executor.WithExecutorID("first"))
	b.call(t, "write_file", "p1", "r", `{"path":"p","text":"1"}`)
	req := awaitRequest(t, requests)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b.answer(t, req, events.ApprovalAnswer{Decision: events.DecisionApprove})
	b.start(t, writeRegistry(t, &written), executor.WithExecutorID("second"), executor.WithApprovalTimeout(500*time.Millisecond))
	if r := b.results.one(t, "p1"); r.Status != events.StatusOK || r.Executor != "second" {
		t.Errorf("after restart: %+v %+v", r, r.Error)
	}

	b.call(t, "write_file", "p2", "r", `{"path":"p","text":"2"}`)
	awaitRequest(t, requests)
	r := b.results.one(t, "p2")
	if r.Status != events.StatusDenied || !strings.Contains(r.Error.Message, "no approval arrived") {
		t.Errorf("expired approval: %+v %+v", r, r.Error)
	}
	if r.Approval == nil || r.Approval.Decision != events.DecisionExpired || r.Approval.At.IsZero() {
		t.Errorf("expired approval record: %+v", r.Approval)
	}
	if _, ran := written.Load("p2"); ran {
		t.Error("the tool ran without approval")
	}
}

// An approval lets a call run, so over NATS too it is heard only from a role that may
// call the tool: acme's user approving acme's admin's call of an admin-only tool is
// refused (the call keeps waiting, the tool does not run), and the admin's own answer,
// published after it, is carried out.
func TestApprovalFromARoleThatMayNotCallTheToolIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ran sync.Map
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "admin_wipe", Parameters: json.RawMessage(`{"type":"object"}`), Roles: []string{"admin"}},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			ran.Store(info.CallID, true)
			return "wiped", nil
		}))
	b.start(t, reg, executor.WithApprovalTimeout(time.Minute))
	requests := subscribe(t, b, "toolfleet.event.approval.requested.admin_wipe.*.*")
	admin, user := events.Identity{Tenant: "acme", Role: "admin"}, events.Identity{Tenant: "acme", Role: "user"}
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: "wipe1", RunID: "r", Caller: admin},
		events.Call{Tool: "admin_wipe", Arguments: json.RawMessage(`{}`)})
	must(t, err)
	b.publish(t, m)
	req := awaitRequest(t, requests)
	if want, _ := events.ApprovalAnsweredSubject(admin, "admin_wipe", "wipe1"); req.AnswerSubject != want {
		t.Fatalf("the request's answer subject %s, want the caller's own %s", req.AnswerSubject, want)
	}

	answer := func(who events.Identity, d events.Decision) {
		m, err := events.NewApprovalAnswer("/human", who, "admin_wipe", "wipe1", events.ApprovalAnswer{Decision: d, By: who.Role})
		must(t, err)
		b.publish(t, m)
	}
	answer(user, events.DecisionApprove)
	// The refused answer is terminated by the executor: wait until the consumer has
	// processed it, then check that nothing ran and no result exists.
	natstest.Eventually(t, 15*time.Second, "the user's answer to be processed", func() bool {
		info, err := b.js.Consumer(context.Background(), events.StreamEvents, events.ApprovalConsumerName("admin_wipe"))
		if err != nil {
			return false
		}
		ci, err := info.Info(context.Background())
		return err == nil && ci.AckFloor.Stream > 0 && ci.NumAckPending == 0 && ci.NumPending == 0
	})
	if _, wiped := ran.Load("wipe1"); wiped || b.results.count("wipe1") != 0 {
		t.Fatalf("the user's approval ran the admin's tool (results: %d)", b.results.count("wipe1"))
	}
	answer(admin, events.DecisionApprove)
	r := b.results.one(t, "wipe1")
	if r.Status != events.StatusOK || r.Approval == nil || r.Approval.By != "acme/admin" {
		t.Fatalf("after the admin's approval: %+v (approval %+v)", r, r.Approval)
	}
}

// What an operator's alerts read of the approvals: every replica serving the tool shows
// how many calls wait for an answer and when the first of them expires (each sees the
// whole bucket); an answered call leaves the count; an expired one is counted once,
// whichever replica denied it, and leaves nothing waiting. Each replica counts itself
// among the tool's executors, and the calls it took first among the queue waits.
func TestApprovalMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var written sync.Map
	requests := subscribe(t, b, "toolfleet.event.approval.requested.write_file.*")
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var stops []func() error
	for i, reg := range regs {
		stops = append(stops, b.start(t, writeRegistry(t, &written), executor.WithExecutorID(fmt.Sprint("replica-", i)),
			executor.WithApprovalTimeout(8*time.Second), executor.WithMetrics(reg)))
	}
	sum := func(name string) float64 {
		var n float64
		for _, reg := range regs {
			n += opstest.Metrics(t, reg)[name]
		}
		return n
	}
	const (
		waiting = `toolfleet_executor_approvals_waiting{tool="write_file"}`
		expiry  = `toolfleet_executor_approvals_next_expiry_timestamp_seconds{tool="write_file"}`
		expired = `toolfleet_executor_approvals_expired_total{tool="write_file"}`
	)
	// a expires in 8s; b, whose caller waits 6s, first.
	b.call(t, "write_file", "a", "r", `{"path":"a","text":"a"}`)
	a := awaitRequest(t, requests)
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: "b", RunID: "r", Deadline: time.Now().Add(6 * time.Second)},
		events.Call{Tool: "write_file", Arguments: json.RawMessage(`{"path":"b","text":"b"}`)})
	must(t, err)
	b.publish(t, m)
	first := awaitRequest(t, requests)
	if !first.ExpiresAt.Before(a.ExpiresAt) {
		t.Fatalf("b expires at %s, after a (%s)", first.ExpiresAt, a.ExpiresAt)
	}
	at := float64(first.ExpiresAt.UnixNano()) / 1e9
	for i, reg := range regs {
		natstest.Eventually(t, 5*time.Second, fmt.Sprint("replica ", i, " to see both approvals waiting"), func() bool {
			got := opstest.Metrics(t, reg)
			return got[waiting] == 2 && math.Abs(got[expiry]-at) < 1e-3
		})
		got := opstest.Metrics(t, reg)
		if n, ok := got[expired]; !ok || n != 0 {
			t.Errorf("replica %d: %s = %v (present: %v), want 0 before any expiry", i, expired, n, ok)
		}
		if n := got[`toolfleet_executor_serving{tool="write_file"}`]; n != 1 {
			t.Errorf("replica %d serves write_file %v times, want 1", i, n)
		}
	}
	if n := sum(`toolfleet_executor_queue_wait_seconds_count{tool="write_file"}`); n != 2 {
		t.Errorf("%v queue waits counted, want 2 (one per call)", n)
	}

	b.answer(t, a, events.ApprovalAnswer{Decision: events.DecisionApprove})
	if r := b.results.one(t, "a"); r.Status != events.StatusOK {
		t.Fatalf("a: %+v", r.Error)
	}
	if r := b.results.one(t, "b"); r.Status != events.StatusDenied || r.Approval == nil || r.Approval.Decision != events.DecisionExpired {
		t.Fatalf("b: %+v %+v", r.Error, r.Approval)
	}
	for i, reg := range regs {
		natstest.Eventually(t, 5*time.Second, fmt.Sprint("replica ", i, " to see none waiting"), func() bool {
			got := opstest.Metrics(t, reg)
			_, next := got[expiry]
			return got[waiting] == 0 && !next
		})
	}
	if n := sum(expired); n != 1 {
		t.Errorf("the expired approval was counted %v times, want once", n)
	}
	must(t, stops[0]())
	if n := opstest.Metrics(t, regs[0])[`toolfleet_executor_serving{tool="write_file"}`]; n != 0 {
		t.Errorf("a stopped replica still serves write_file %v times", n)
	}
}
