package events

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Identity is who makes a call: a tenant and a role within it. The zero Identity is an
// anonymous caller.
//
// An identity is never read from what a caller writes in a message (headers, data,
// metadata): it is part of the call's subject, toolfleet.call.<tool>.<tenant>.<role>
// ([CallSubject]), and NATS permissions decide which user may publish on which
// subjects. So a tenant's NATS user, allowed toolfleet.call.*.<tenant>.<role> and
// nothing else under toolfleet.call, cannot claim another tenant or role; the planner,
// which publishes for its API callers, maps each caller's bearer token to the identity
// it publishes with. Executors enforce tools.Definition.Roles and Tenants with the
// identity of the subject (result [StatusForbidden], the tool never runs), and address the
// result, approval request and answer to subjects that end in the tenant
// ([ResultSubject], [ApprovalRequestedSubject], [ApprovalAnsweredSubject]), so each
// tenant's user can be allowed its own and nothing else. deploy/k8s/base/nats holds the
// permissions of a tenant's user.
type Identity struct {
	Tenant string `json:"tenant"`
	Role   string `json:"role"`
}

// IsZero reports whether the identity is the anonymous caller's.
func (id Identity) IsZero() bool { return id == Identity{} }

// Validate returns an invalid_event *tools.Error unless the identity is zero, or has a
// tenant and a role of 1 to 64 letters, digits, '_' or '-' (each is a subject token).
func (id Identity) Validate() error {
	if id.IsZero() {
		return nil
	}
	if err := validateIdentityToken("tenant", id.Tenant); err != nil {
		return err
	}
	return validateIdentityToken("role", id.Role)
}

func validateIdentityToken(what, s string) error {
	if isIdentityToken(s) {
		return nil
	}
	return tools.Errorf(tools.CodeInvalidEvent,
		"%s %q is not allowed: use 1 to 64 letters, digits, '_' or '-' (it becomes a NATS subject token)", what, s)
}

func isIdentityToken(s string) bool { return isIDToken(s, 64) }

// Describe names the identity for the record — who answered an approval, who canceled a
// call or a run: tenant/role, or "anonymous" for the zero Identity. A record names the
// identity that sent the act (a call's or a cancel's subject, an API caller's token),
// never a name the actor wrote.
func (id Identity) Describe() string {
	switch {
	case id.IsZero():
		return "anonymous"
	case id.Role == "":
		return id.Tenant
	}
	return id.Tenant + "/" + id.Role
}

// ValidateRoles returns an invalid_event *tools.Error unless every role is a valid role
// token (see [Identity.Validate]): the operator roles of a planner or an executor.
func ValidateRoles(roles []string) error {
	for _, r := range roles {
		if err := validateIdentityToken("role", r); err != nil {
			return err
		}
	}
	return nil
}

// Who may act on a run or a call. One rule, decided by [MayAct] and applied wherever
// the act arrives: the planner's HTTP API, MCP edge and NATS control endpoint (acts on
// runs), and the executors (approval answers and cancels of calls, heard over NATS).
//
//   - The owner is the identity that started the run, or made the call (the identity
//     of its subject, [CallSubject]; a run's calls are made with the run's).
//   - An actor of another tenant than the owner's (an anonymous actor on a tenant's, or
//     a tenant's actor on an anonymous one) is refused as if the run or call did not
//     exist ([Refusal].Hidden: the API answers 404; NATS permissions keep a tenant's
//     user off another tenant's subjects).
//   - Within the tenant, the owner's role acts, and so do the fleet's operator roles;
//     any other role is refused (403).
//   - An act that lets a call run — an approval answer — is refused, too, to an actor
//     that may not call the tool itself (its roles and tenants).
//
// Operator roles are a setting of the fleet: every planner and executor of a fleet
// must be given the same (-operator-roles, TOOLFLEET_OPERATOR_ROLES), or an operator's
// approval that the API accepts is refused by the executors.

// Act is an actor's act on a run or a call, as [MayAct] judges it.
type Act struct {
	// Actor is who acts: the identity of the act's subject, or of the API caller's token.
	Actor Identity
	// Owner is who started the run or made the call.
	Owner Identity
	// What is the act, as a verb phrase: "cancel", "pause", "answer the approvals of".
	What string
	// Kind ("run" or "call") and ID name what is acted on.
	Kind, ID string
}

// Refusal is why [MayAct] refuses an act.
type Refusal struct {
	// Hidden is set when the actor is of another tenant than the owner: for it the run
	// or call does not exist (the API answers 404, not 403).
	Hidden bool
	// Message says why, the same wherever the act arrived.
	Message string
}

// Error returns the message.
func (r *Refusal) Error() string { return r.Message }

// MayAct decides whether a.Actor may do a to what a.Owner owns, operatorRoles being the
// fleet's operator roles; tool is the definition of the tool whose call the act lets run
// (an approval answer), nil for any other act. It returns nil when the act is allowed,
// else why not. See the rule above.
func MayAct(a Act, operatorRoles []string, tool *tools.Definition) *Refusal {
	if a.Actor.Tenant != a.Owner.Tenant {
		return &Refusal{Hidden: true, Message: fmt.Sprintf("no %s %q", a.Kind, a.ID)}
	}
	if a.Actor.Role != a.Owner.Role && !slices.Contains(operatorRoles, a.Actor.Role) {
		return &Refusal{Message: fmt.Sprintf("role %q may not %s %s %s: it belongs to role %q (only the owner's role and the operator roles act on a %s)",
			a.Actor.Role, a.What, a.Kind, a.ID, a.Owner.Role, a.Kind)}
	}
	if tool != nil && !tool.AllowsCaller(a.Actor.Tenant, a.Actor.Role) {
		who := "an anonymous caller"
		if !a.Actor.IsZero() {
			who = "role " + a.Actor.Role
		}
		return &Refusal{Message: fmt.Sprintf("%s may not %s %s %s: tool %q may not be called by %s (allowed roles: %s), and the act lets its call run",
			who, a.What, a.Kind, a.ID, tool.Name, who, strings.Join(tool.Roles, ", "))}
	}
	return nil
}
