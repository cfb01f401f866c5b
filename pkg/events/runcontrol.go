package events

import "strings"

const runCancelPrefix = "toolfleet.control.cancel."

// AllRunCancels matches every run cancel request ([RunCancelSubject]).
const AllRunCancels = "toolfleet.control.cancel.>"

// RunCancelSubject is where a NATS client asks the planner to cancel run, by
// request/reply: toolfleet.control.cancel.<run>, followed by .<tenant> for a run of
// tenant. The tenant token is the caller's identity (NATS permissions let a tenant
// publish on its own subjects only): the planner cancels only a run of that tenant. No
// stream captures these subjects; a planner replica answers (a micro service).
func RunCancelSubject(tenant, run string) (string, error) {
	if err := ValidateID("run id", run); err != nil {
		return "", err
	}
	return withTenant(runCancelPrefix+run, tenant)
}

// ParseRunCancelSubject returns the run and the tenant (empty for an anonymous caller) a
// run cancel subject names; ok is false unless subject is exactly
// toolfleet.control.cancel.<run>[.<tenant>].
func ParseRunCancelSubject(subject string) (run, tenant string, ok bool) {
	rest, ok := strings.CutPrefix(subject, runCancelPrefix)
	if !ok {
		return "", "", false
	}
	run, tenant, hasTenant := strings.Cut(rest, ".")
	if !isIDToken(run, 128) || hasTenant && !isIdentityToken(tenant) {
		return "", "", false
	}
	return run, tenant, true
}
