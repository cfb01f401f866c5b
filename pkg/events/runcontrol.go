package events

import "strings"

const runCancelPrefix = "toolfleet.control.cancel."

// AllRunCancels matches every run cancel request ([RunCancelSubject]).
const AllRunCancels = "toolfleet.control.cancel.>"

// RunCancelSubject is where a NATS client acting as caller asks the planner to cancel
// run, by request/reply: toolfleet.control.cancel.<run> for an anonymous caller,
// followed by .<tenant>.<role> for a caller with an identity. The tenant and role are
// the caller's identity (NATS permissions let a tenant's user publish on its own
// subjects only): the planner cancels only a run of that tenant, and only for a role
// that may act on it (the run's owner's, or an operator role). No stream captures these
// subjects; a planner replica answers (a micro service).
func RunCancelSubject(caller Identity, run string) (string, error) {
	if err := ValidateID("run id", run); err != nil {
		return "", err
	}
	if caller.IsZero() {
		return runCancelPrefix + run, nil
	}
	if err := caller.Validate(); err != nil {
		return "", err
	}
	return runCancelPrefix + run + "." + caller.Tenant + "." + caller.Role, nil
}

// ParseRunCancelSubject returns the run and the caller (zero for an anonymous one) a
// run cancel subject names; ok is false unless subject is exactly
// toolfleet.control.cancel.<run>[.<tenant>.<role>].
func ParseRunCancelSubject(subject string) (run string, caller Identity, ok bool) {
	rest, ok := strings.CutPrefix(subject, runCancelPrefix)
	if !ok {
		return "", Identity{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 1 && len(parts) != 3 || !isIDToken(parts[0], 128) {
		return "", Identity{}, false
	}
	if len(parts) == 3 {
		if !isIdentityToken(parts[1]) || !isIdentityToken(parts[2]) {
			return "", Identity{}, false
		}
		caller = Identity{Tenant: parts[1], Role: parts[2]}
	}
	return parts[0], caller, true
}
