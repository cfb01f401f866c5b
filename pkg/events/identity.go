package events

import "github.com/toolfleet/toolfleet/pkg/tools"

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
