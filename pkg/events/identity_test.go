package events_test

import (
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The rule of who may act on a run or a call: the owner's role and the operator roles of
// its tenant; nobody of another tenant (hidden); and for an act that lets a call run,
// only an actor that may call the tool itself.
func TestMayAct(t *testing.T) {
	t.Parallel()
	admin, user, ops := events.Identity{Tenant: "acme", Role: "admin"}, events.Identity{Tenant: "acme", Role: "user"}, events.Identity{Tenant: "acme", Role: "ops"}
	globex, anon := events.Identity{Tenant: "globex", Role: "admin"}, events.Identity{}
	adminOnly := &tools.Definition{Name: "wipe", Roles: []string{"admin"}}
	operators := []string{"ops"}
	for _, tt := range []struct {
		name         string
		actor, owner events.Identity
		tool         *tools.Definition
		hidden       bool
		says         string // empty: allowed
	}{
		{name: "the owner's role", actor: admin, owner: admin},
		{name: "an anonymous caller, on an anonymous call", actor: anon, owner: anon},
		{name: "an operator role", actor: ops, owner: admin},
		{name: "another role", actor: user, owner: admin, says: `role "user" may not cancel call c1: it belongs to role "admin"`},
		{name: "another tenant", actor: globex, owner: admin, hidden: true, says: `no call "c1"`},
		{name: "an anonymous caller, on a tenant's call", actor: anon, owner: admin, hidden: true, says: `no call "c1"`},
		{name: "a tenant, on an anonymous call", actor: admin, owner: anon, hidden: true, says: `no call "c1"`},
		{name: "the owner's role, approving a tool it may call", actor: admin, owner: admin, tool: adminOnly},
		{name: "an operator, approving a tool it may not call", actor: ops, owner: admin, tool: adminOnly,
			says: `role ops may not cancel call c1: tool "wipe" may not be called by role ops (allowed roles: admin)`},
	} {
		r := events.MayAct(events.Act{Actor: tt.actor, Owner: tt.owner, What: "cancel", Kind: "call", ID: "c1"}, operators, tt.tool)
		switch {
		case tt.says == "" && r != nil:
			t.Errorf("%s: refused: %v", tt.name, r)
		case tt.says != "" && (r == nil || r.Hidden != tt.hidden || !strings.Contains(r.Message, tt.says)):
			t.Errorf("%s: %+v; want refused (hidden %v) saying %q", tt.name, r, tt.hidden, tt.says)
		}
	}
	// No operator roles configured: another role is refused.
	if r := events.MayAct(events.Act{Actor: ops, Owner: admin, What: "cancel", Kind: "run", ID: "r1"}, nil, nil); r == nil || r.Hidden {
		t.Errorf("ops without operator roles: %+v", r)
	}
}

func TestIdentityDescribe(t *testing.T) {
	t.Parallel()
	for id, want := range map[events.Identity]string{{}: "anonymous", {Tenant: "acme", Role: "admin"}: "acme/admin", {Tenant: "acme"}: "acme"} {
		if got := id.Describe(); got != want {
			t.Errorf("%+v.Describe() = %q, want %q", id, got, want)
		}
	}
	if err := events.ValidateRoles([]string{"ops", "on-call"}); err != nil {
		t.Error(err)
	}
	if err := events.ValidateRoles([]string{"ops", "a.b"}); err == nil {
		t.Error("a role with a dot was accepted")
	}
}
