package executor_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The executor takes a caller's identity from the call's subject alone and enforces a
// tool's roles and tenants with it: a caller outside them gets forbidden and the tool
// never runs, whatever the call's metadata claims; an allowed one runs, sees its identity,
// and is answered on its tenant's result subject. Two tenants may use the same call id,
// even for a tool that must not run twice.
func TestIdentityFromTheSubject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	ran := map[string]int{} // tenant/role -> runs
	reg := tools.NewRegistry()
	for _, d := range []tools.Definition{
		{Name: "admin_report", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true, Roles: []string{"admin"}, Tenants: []string{"acme", "globex"}},
		{Name: "charge", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true, Idempotent: new(false)},
	} {
		name := d.Name
		if err := reg.AddFunc(d, func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			ran[name+":"+info.Tenant+"/"+info.Role]++
			mu.Unlock()
			return info.Tenant + "/" + info.Role, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t, reg)

	call := func(id string, caller events.Identity, tool string, metadata map[string]string) {
		m, err := events.NewCall(events.CallOptions{Source: "/test", ID: id, RunID: "r", Caller: caller},
			events.Call{Tool: tool, Arguments: json.RawMessage(`{}`), Metadata: metadata})
		if err != nil {
			t.Fatal(err)
		}
		b.publish(t, m)
	}
	acmeAdmin := events.Identity{Tenant: "acme", Role: "admin"}
	call("ok", acmeAdmin, "admin_report", nil)
	call("wrong-role", events.Identity{Tenant: "acme", Role: "guest"}, "admin_report", map[string]string{"role": "admin"})
	call("wrong-tenant", events.Identity{Tenant: "initech", Role: "admin"}, "admin_report", nil)
	call("anonymous", events.Identity{}, "admin_report", map[string]string{"role": "admin", "tenant": "acme"})
	// The same id, by two tenants, of a tool that must not run twice: both run, once each.
	call("same-id", acmeAdmin, "charge", nil)
	call("same-id", events.Identity{Tenant: "globex", Role: "user"}, "charge", nil)
	// An id that is not a subject token still runs a non-idempotent tool.
	call("urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", events.Identity{}, "charge", nil)

	res := b.results.wait(t, 20*time.Second, "ok", "wrong-role", "wrong-tenant", "anonymous", "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66")
	if r := res["ok"]; r.Status != events.StatusOK || string(r.Output) != `"acme/admin"` || r.Caller != acmeAdmin {
		t.Errorf("allowed call: %+v", r)
	}
	for _, id := range []string{"wrong-role", "wrong-tenant", "anonymous"} {
		r := res[id]
		if r.Status != events.StatusForbidden || r.Error == nil || r.Error.Code != tools.CodeForbidden || r.Attempts != 0 {
			t.Errorf("%s: %+v, %+v; want forbidden, never run", id, r, r.Error)
		}
	}
	if r := res["urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"]; r.Status != events.StatusOK {
		t.Errorf("non-idempotent call with a urn id: %+v %+v", r, r.Error)
	}
	natstest.Eventually(t, 20*time.Second, "both tenants' same-id calls", func() bool { return b.results.count("same-id") == 2 })
	b.results.mu.Lock()
	tenants := map[string]events.Status{}
	for _, r := range b.results.byID["same-id"] {
		tenants[r.Caller.Tenant] = r.Status
	}
	b.results.mu.Unlock()
	if tenants["acme"] != events.StatusOK || tenants["globex"] != events.StatusOK {
		t.Errorf("same call id by two tenants: %v; want both ok", tenants)
	}
	// Each result is on its tenant's subject.
	b.results.mu.Lock()
	subj := b.results.raw["ok"][0].Subject
	b.results.mu.Unlock()
	if want, _ := events.ResultSubject("acme", "r", "ok"); subj != want {
		t.Errorf("result subject %s, want %s", subj, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["admin_report:acme/admin"] != 1 || ran["charge:acme/admin"] != 1 || ran["charge:globex/user"] != 1 || len(ran) != 4 {
		t.Errorf("runs %v; want admin_report once for acme/admin, charge once per tenant and once anonymously", ran)
	}
}

// The look-up for a stored result before a call runs is on the caller's own result
// subject: an anonymous caller's result for a call id does not stand for a tenant's call
// of the same id (which must still be run and answered).
func TestStoredResultIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, echoRegistry(t))
	b.call(t, "echo", "dup", "r", `{"text":"anonymous"}`)
	if r := b.results.one(t, "dup"); r.Status != events.StatusOK {
		t.Fatalf("anonymous call: %+v", r)
	}
	m, err := events.NewCall(events.CallOptions{Source: "/test", ID: "dup", RunID: "r", Caller: events.Identity{Tenant: "acme", Role: "user"}},
		events.Call{Tool: "echo", Arguments: json.RawMessage(`{"text":"acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, m)
	natstest.Eventually(t, 15*time.Second, "acme's call of the same id answered", func() bool { return b.results.count("dup") == 2 })
	b.results.mu.Lock()
	defer b.results.mu.Unlock()
	if r := b.results.byID["dup"][1]; r.Caller.Tenant != "acme" || string(r.Output) != `{"text":"acme"}` {
		t.Errorf("acme's result %+v", r)
	}
}
