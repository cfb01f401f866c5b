package deploytest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	tfclient "github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// One rule at every door, over NATS: with the shipped permissions and tenant users made
// from the template, a user may answer approvals and cancel calls only as its own tenant
// and role, and the executor (under its own user, with ops as the fleet's operator role)
// carries an answer or a cancel out only for the call's owner's role or an operator role
// of its tenant. acme's user approving acme's admin's parked call with replacement
// arguments, or canceling its running call, is refused: the call is left as it was, and
// the refusal is on the run's events, where acme finds it. The admin's own answer runs the
// call as asked and is recorded as the admin's, whatever its by says; an operator
// answers too; the admin's cancel stops its call.
func TestDoorsOverNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an authenticated server with an executor")
	}
	admin, user, ops, globexAdmin := tenantUser{"acme", "admin"}, tenantUser{"acme", "user"}, tenantUser{"acme", "ops"}, tenantUser{"globex", "admin"}
	s := startTenantServer(t, admin, user, ops, globexAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var mu sync.Mutex
	wrote := map[string]string{}
	started := make(chan string, 8)
	release := make(chan struct{})
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "unsafe_writer", Description: "Writes; needs an approval.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			wrote[info.CallID] = string(args)
			mu.Unlock()
			return "written", nil
		}))
	must(t, reg.AddFunc(tools.Definition{Name: "slow", Description: "Runs until released or canceled.",
		Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			started <- info.CallID
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return "finished", nil
			}
		}))
	exec := s.connect(t, "executor")
	ex, err := executor.New(exec.nc, reg, executor.WithLogger(zerolog.Nop()), executor.WithOperatorRoles("ops"))
	must(t, err)
	runPart(t, ex.Run)
	select {
	case <-ex.Ready():
	case <-ctx.Done():
		t.Fatal("the executor never got ready")
	}
	conns, clients := map[string]*client{}, map[string]*tfclient.Client{}
	for _, u := range []tenantUser{admin, user, ops, globexAdmin} {
		conns[u.name()] = s.connectTenant(t, u)
		c, err := tfclient.New(conns[u.name()].nc, tfclient.WithIdentity(events.Identity{Tenant: u.tenant, Role: u.role}))
		must(t, err)
		clients[u.name()] = c
	}
	adminC, userC, opsC := clients[admin.name()], clients[user.name()], clients[ops.name()]
	follow, err := adminC.FollowRun(ctx, "run-d")
	must(t, err)
	defer follow.Stop()
	refused := func() events.RefusedAct {
		t.Helper()
		for {
			e, r, err := follow.Next()
			if err != nil {
				t.Fatalf("following run-d: %v", err)
			}
			if e.Type == events.RunType(events.RunActRefused) {
				var act events.RefusedAct
				must(t, json.Unmarshal(r.Detail, &act))
				return act
			}
		}
	}
	call := func(c *tfclient.Client, tool, id, args string) <-chan events.Result {
		done := make(chan events.Result, 1)
		go func() {
			r, _ := c.Call(ctx, tfclient.Request{Tool: tool, ID: id, RunID: "run-d", Arguments: json.RawMessage(args)})
			done <- r
		}()
		return done
	}
	approvals, err := adminC.WatchApprovals(ctx)
	must(t, err)
	defer approvals.Stop()
	awaitApproval := func(id string) {
		t.Helper()
		if _, req, err := approvals.Next(); err != nil || req.CallID != id {
			t.Fatalf("approval request of %s: %+v, %v", id, req, err)
		}
	}

	// Approvals: acme's user's answer, with replacement arguments and a by naming the
	// admin, is refused; the call keeps waiting.
	done := call(adminC, "unsafe_writer", "uw1", `{"text":"hi"}`)
	awaitApproval("uw1")
	must(t, userC.Answer(ctx, "unsafe_writer", "uw1", events.ApprovalAnswer{Decision: events.DecisionApprove,
		Arguments: json.RawMessage(`{"text":"owned"}`), By: "acme/admin"}))
	if act := refused(); act.Act != events.ActApprovalAnswer || act.Actor != (events.Identity{Tenant: "acme", Role: "user"}) ||
		!strings.Contains(act.Message, `role "user" may not answer the approvals of call uw1: it belongs to role "admin"`) {
		t.Fatalf("refusal %+v", act)
	}
	select {
	case r := <-done:
		t.Fatalf("acme's user's answer answered the admin's call: %+v", r)
	default:
	}
	// The admin's own answer runs the call as it was asked, recorded as the admin's.
	must(t, adminC.Answer(ctx, "unsafe_writer", "uw1", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "mallory"}))
	if r := <-done; r.Status != events.StatusOK || r.Approval == nil || r.Approval.By != "acme/admin" || r.Approval.ClaimedBy != "mallory" {
		t.Fatalf("after the admin's answer: %+v (approval %+v)", r, r.Approval)
	}
	mu.Lock()
	if got := wrote["uw1"]; got != `{"text":"hi"}` {
		t.Errorf("the tool ran with %s, want the call's own arguments", got)
	}
	mu.Unlock()
	// An operator role of the tenant answers another role's call.
	done = call(adminC, "unsafe_writer", "uw2", `{"text":"hi"}`)
	awaitApproval("uw2")
	must(t, opsC.Answer(ctx, "unsafe_writer", "uw2", events.ApprovalAnswer{Decision: events.DecisionDeny, Reason: "not now"}))
	if r := <-done; r.Status != events.StatusDenied || r.Approval == nil || r.Approval.By != "acme/ops" {
		t.Fatalf("the operator's answer: %+v (approval %+v)", r, r.Approval)
	}
	// globex cannot answer as acme at all.
	asAdmin, _ := events.ApprovalAnsweredSubject(events.Identity{Tenant: "acme", Role: "admin"}, "unsafe_writer", "uw2")
	conns[globexAdmin.name()].denied("answer acme's approval", asAdmin, func(ctx context.Context) error {
		_, err := conns[globexAdmin.name()].js.Publish(ctx, asAdmin, []byte(`{"decision":"approve"}`))
		return err
	})

	// Cancels: acme's user's cancel of the admin's running call is refused, and the call
	// finishes; the admin's own cancel stops its call, and says so.
	keep := call(adminC, "slow", "s1", `{}`)
	if id := <-started; id != "s1" {
		t.Fatalf("started %s", id)
	}
	must(t, userC.Cancel(ctx, "slow", "s1"))
	if act := refused(); act.Act != events.ActCancel || act.Actor != (events.Identity{Tenant: "acme", Role: "user"}) ||
		!strings.Contains(act.Message, `role "user" may not cancel call s1: it belongs to role "admin"`) {
		t.Fatalf("refusal %+v", act)
	}
	stop := call(adminC, "slow", "s2", `{}`)
	if id := <-started; id != "s2" {
		t.Fatalf("started %s", id)
	}
	res, err := adminC.CancelAndWait(ctx, "slow", "run-d", "s2")
	if err != nil || res.Status != events.StatusCanceled || !strings.Contains(res.Error.Message, "canceled by acme/admin") {
		t.Fatalf("the admin's cancel: %+v, %v", res.Error, err)
	}
	<-stop
	close(release)
	if r := <-keep; r.Status != events.StatusOK {
		t.Fatalf("the call another role tried to cancel: %+v; want it finished", r)
	}

	exec.noViolations() // the executor may record what it refused
	for _, u := range []tenantUser{admin, user, ops} {
		conns[u.name()].noViolations(refusedCleanup(events.StreamResults), refusedCleanup(events.StreamEvents))
	}
}
