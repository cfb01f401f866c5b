package events

import (
	"regexp"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Subject roots. Every subject toolfleet uses is built by a function of this file, so
// that permissions, stream filters and publishers agree.
const (
	SubjectRoot       = "toolfleet"
	callPrefix        = "toolfleet.call."
	resultPrefix      = "toolfleet.result."
	eventPrefix       = "toolfleet.event."
	dlqPrefix         = "toolfleet.dlq."
	approvalReqPrefix = "toolfleet.event.approval.requested."
	approvalAnsPrefix = "toolfleet.event.approval.answered."
	runEventPrefix    = "toolfleet.event.run."
	cancelPrefix      = "toolfleet.event.cancel."
	planPrefix        = "toolfleet.plan."
	payloadPrefix     = "toolfleet.payload."
	// AllPayloads matches every chunk of every payload stored by reference.
	AllPayloads        = "toolfleet.payload.>"
	AllCalls           = "toolfleet.call.>"
	AllResults         = "toolfleet.result.>"
	AllEvents          = "toolfleet.event.>"
	AllDeadLetters     = "toolfleet.dlq.>"
	AllApprovalAnswers = "toolfleet.event.approval.answered.>"
	// AllApprovalRequests matches every approval request, of any tool.
	AllApprovalRequests = "toolfleet.event.approval.requested.>"
	// AllCancels matches every cancel of a call ([CancelSubject]), of any tool.
	AllCancels = "toolfleet.event.cancel.>"
	// AllPlanSteps matches the planner's step messages ([PlanSubject]).
	AllPlanSteps = "toolfleet.plan.>"
	// PickSubject is the picker service's request/reply endpoint: a planner asks it to
	// rank the catalog's tools for a request.
	PickSubject = "toolfleet.picker.pick"
)

// IDPattern is the alphabet of ids that are their own subject token (see [IDToken]):
// letters, digits, '_' and '-'. A UUID, a ULID, a NUID and the providers' tool call ids
// (call_…, toolu_…) all fit; toolfleet's own ids (executor ids, planner run ids) are
// made of it.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

var wordPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidateID returns an *tools.Error (invalid_event) unless id matches [IDPattern]; what
// names the id in the message ("call id", "run id").
func ValidateID(what, id string) error {
	if isIDToken(id, 128) {
		return nil
	}
	return tools.Errorf(tools.CodeInvalidEvent,
		"%s %q is not allowed: use 1 to 128 letters, digits, '_' or '-' (it becomes a NATS subject token)", what, id)
}

// ValidateTool returns an *tools.Error (invalid_event) unless name is a valid tool name.
func ValidateTool(name string) error {
	if isIDToken(name, 64) {
		return nil
	}
	return tools.Errorf(tools.CodeInvalidEvent,
		"tool name %q is not allowed: use 1 to 64 letters, digits, '_' or '-'", name)
}

// ValidateToken returns an error unless word is a lower-case event word such as "step".
func ValidateToken(word string) error {
	if wordPattern.MatchString(word) {
		return nil
	}
	return tools.Errorf(tools.CodeInvalidEvent,
		"event word %q is not allowed: use 1 to 64 lower-case letters, digits, '_' or '-'", word)
}

// CallSubject is where calls of tool are published: toolfleet.call.<tool> for an
// anonymous caller (the zero [Identity]), toolfleet.call.<tool>.<tenant>.<role> for a
// caller with an identity. The subject is the only place an executor reads a caller's
// identity from, so NATS permissions on these subjects decide who may claim it.
func CallSubject(caller Identity, tool string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	if caller.IsZero() {
		return callPrefix + tool, nil
	}
	if err := caller.Validate(); err != nil {
		return "", err
	}
	return callPrefix + tool + "." + caller.Tenant + "." + caller.Role, nil
}

// ResultSubject is where the result of call in run is published:
// toolfleet.result.<run>.<call> for an anonymous caller, toolfleet.result.<run>.<call>.<tenant>
// for a caller of tenant; each id as its [IDToken], so any non-empty id works. A caller
// subscribes to [RunResultsSubject] to gather a run's results.
func ResultSubject(tenant, run, call string) (string, error) {
	if run == "" || call == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "a result subject needs a run id and a call id (got %q, %q)", run, call)
	}
	subj := resultPrefix + IDToken(run) + "." + IDToken(call)
	return withTenant(subj, tenant)
}

// RunResultsSubject is the filter matching every result of run, a run of tenant (empty:
// an anonymous caller's).
func RunResultsSubject(tenant, run string) (string, error) {
	if run == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "run id is empty")
	}
	return withTenant(resultPrefix+IDToken(run)+".*", tenant)
}

// withTenant appends tenant as the last token of subj, unless it is empty.
func withTenant(subj, tenant string) (string, error) {
	if tenant == "" {
		return subj, nil
	}
	if err := validateIdentityToken("tenant", tenant); err != nil {
		return "", err
	}
	return subj + "." + tenant, nil
}

// DeadLetterSubject is where messages for tool that could not be processed go:
// toolfleet.dlq.<tool>. Messages whose tool is unknown or invalid go to
// toolfleet.dlq._unknown.
func DeadLetterSubject(tool string) string {
	if ValidateTool(tool) != nil {
		return dlqPrefix + "_unknown"
	}
	return dlqPrefix + tool
}

// ApprovalRequestedSubject is where an approval request for call of tool is announced:
// toolfleet.event.approval.requested.<tool>.<IDToken(call)>, followed by .<tenant> for a
// call of tenant.
func ApprovalRequestedSubject(tenant, tool, call string) (string, error) {
	return approvalSubject(approvalReqPrefix, tenant, tool, call)
}

// ApprovalAnsweredSubject is where answerer publishes its answer to the approval of
// call of tool: toolfleet.event.approval.answered.<tool>.<IDToken(call)> for an
// anonymous answerer (the zero [Identity]), followed by .<tenant>.<role> for an answerer
// with an identity. The tool is part of the subject so that only the executors serving it
// consume the answer; the tenant and role, so that NATS permissions decide who may answer
// as whom: executors carry out an answer only from an answerer [MayAct] allows (the
// call's owner's role or an operator role of its tenant, which may call the tool itself:
// an approval never lets a caller run what it may not).
func ApprovalAnsweredSubject(answerer Identity, tool, call string) (string, error) {
	subj, err := approvalSubject(approvalAnsPrefix, "", tool, call)
	if err != nil {
		return "", err
	}
	return withActor(subj, answerer, "an approval answerer")
}

// withActor appends actor's tenant and role to subj, unless actor is the zero Identity;
// who names the actor in the error of an identity without both.
func withActor(subj string, actor Identity, who string) (string, error) {
	if actor.IsZero() {
		return subj, nil
	}
	if err := actor.Validate(); err != nil {
		return "", err
	}
	if actor.Tenant == "" || actor.Role == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "%s needs both a tenant and a role, got %q/%q", who, actor.Tenant, actor.Role)
	}
	return subj + "." + actor.Tenant + "." + actor.Role, nil
}

func approvalSubject(prefix, tenant, tool, call string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	if call == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "call id is empty")
	}
	return withTenant(prefix+tool+"."+IDToken(call), tenant)
}

// CancelSubject is where sender publishes a cancel of call of tool:
// toolfleet.event.cancel.<tool>.<IDToken(call)> for an anonymous sender (the zero
// [Identity]), followed by .<tenant>.<role> for a sender with an identity — the shape of
// [ApprovalAnsweredSubject]. The tool is part of the subject so that only the executors
// serving it listen; the tenant, so that a tenant's cancel never reaches another
// tenant's call of the same id; the role, so that NATS permissions decide who may cancel
// as whom and executors stop a call only for a sender [MayAct] allows (the call's
// owner's role or an operator role of its tenant).
func CancelSubject(sender Identity, tool, call string) (string, error) {
	subj, err := approvalSubject(cancelPrefix, "", tool, call)
	if err != nil {
		return "", err
	}
	return withActor(subj, sender, "a cancel's sender")
}

// ParseCancelSubject returns the tool, the call token and the sender (the zero Identity
// for an anonymous one) a cancel's subject names; ok is false unless subject is exactly
// toolfleet.event.cancel.<tool>.<token>[.<tenant>.<role>]. A cancel of the shape before
// roles, toolfleet.event.cancel.<tool>.<token>.<tenant>, is not one: its sender is
// unknown, so no executor acts on it.
func ParseCancelSubject(subject string) (tool, callToken string, sender Identity, ok bool) {
	return parseActorSubject(subject, cancelPrefix)
}

// CancelsFilter matches every cancel of a call of tool, of every tenant.
func CancelsFilter(tool string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	return cancelPrefix + tool + ".>", nil
}

// CallCancelsFilter matches every cancel of call of tool, a call owner made, whoever
// sent it: the anonymous sender's subject for an anonymous owner, every role's of the
// owner's tenant otherwise (toolfleet.event.cancel.<tool>.<token>.<tenant>.*).
func CallCancelsFilter(owner Identity, tool, call string) (string, error) {
	subj, err := approvalSubject(cancelPrefix, "", tool, call)
	if err != nil || owner.IsZero() {
		return subj, err
	}
	if subj, err = withTenant(subj, owner.Tenant); err != nil {
		return "", err
	}
	return subj + ".*", nil
}

// ParseApprovalAnswerSubject returns the tool, the call token and the answerer (the zero
// Identity for an anonymous one) an approval answer's subject names; ok is false unless
// subject is exactly toolfleet.event.approval.answered.<tool>.<token>[.<tenant>.<role>].
func ParseApprovalAnswerSubject(subject string) (tool, callToken string, answerer Identity, ok bool) {
	return parseActorSubject(subject, approvalAnsPrefix)
}

// parseActorSubject returns the tool, the call token and the actor of a subject that
// prefix + <tool>.<token>[.<tenant>.<role>] is ([ApprovalAnsweredSubject],
// [CancelSubject]); ok is false for a subject of any other shape.
func parseActorSubject(subject, prefix string) (tool, callToken string, actor Identity, ok bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", "", Identity{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 2 && len(parts) != 4 || !isTool(parts[0]) || !isToken(parts[1]) {
		return "", "", Identity{}, false
	}
	if len(parts) == 4 {
		if !isIdentityToken(parts[2]) || !isIdentityToken(parts[3]) {
			return "", "", Identity{}, false
		}
		actor = Identity{Tenant: parts[2], Role: parts[3]}
	}
	return parts[0], parts[1], actor, true
}

// ParseApprovalRequestSubject returns the tool, the call token and the tenant an
// approval request's subject names; ok is false unless subject is exactly
// toolfleet.event.approval.requested.<tool>.<token>[.<tenant>].
func ParseApprovalRequestSubject(subject string) (tool, callToken, tenant string, ok bool) {
	return parseTwo(subject, approvalReqPrefix, isTool, isToken)
}

// parseTwo returns the two tokens that follow prefix in subject, each passing its rule,
// and the tenant token that may end it; ok is false unless subject is exactly
// prefix + first + "." + second, optionally followed by "." + a valid tenant.
func parseTwo(subject, prefix string, first, second func(string) bool) (a, b, tenant string, ok bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", "", "", false
	}
	a, rest, ok = strings.Cut(rest, ".")
	if !ok || !first(a) {
		return "", "", "", false
	}
	b, tenant, hasTenant := strings.Cut(rest, ".")
	if !second(b) || hasTenant && !isIdentityToken(tenant) {
		return "", "", "", false
	}
	return a, b, tenant, true
}

func isTool(s string) bool { return isIDToken(s, 64) }

func isWord(s string) bool { return wordPattern.MatchString(s) }

// ParseResultSubject returns the run and call tokens and the tenant (empty for an
// anonymous caller) a result's subject names; ok is false unless subject is exactly
// toolfleet.result.<run token>.<call token>[.<tenant>]. The tokens are [IDToken]s:
// compare them with IDToken of an id, not with the id.
func ParseResultSubject(subject string) (runToken, callToken, tenant string, ok bool) {
	return parseTwo(subject, resultPrefix, isToken, isToken)
}

// ParseRunEventSubject returns the run token, the event word and the tenant of a run
// lifecycle event's subject; ok is false unless subject is exactly
// toolfleet.event.run.<run token>.<what>[.<tenant>] with a valid word ([ValidateToken]).
func ParseRunEventSubject(subject string) (runToken, what, tenant string, ok bool) {
	return parseTwo(subject, runEventPrefix, isToken, isWord)
}

// ApprovalAnswersFilter matches every approval answer for tool, of every tenant.
func ApprovalAnswersFilter(tool string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	return approvalAnsPrefix + tool + ".>", nil
}

// ApprovalRequestsFilter matches the approval requests of tenant's calls, of every tool;
// with tenant empty, every approval request (of anonymous callers and every tenant).
func ApprovalRequestsFilter(tenant string) (string, error) {
	if tenant == "" {
		return AllApprovalRequests, nil
	}
	return withTenant(approvalReqPrefix+"*.*", tenant)
}

// RunEventsSubject is the filter matching every lifecycle event of run, a run of tenant
// (empty: an anonymous caller's).
func RunEventsSubject(tenant, run string) (string, error) {
	if run == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "run id is empty")
	}
	return withTenant(runEventPrefix+IDToken(run)+".*", tenant)
}

// TenantRunEventsFilter is the filter matching every lifecycle event of every run of
// tenant (empty: of anonymous callers' runs).
func TenantRunEventsFilter(tenant string) (string, error) {
	return withTenant(runEventPrefix+"*.*", tenant)
}

// RunEventSubject is where a run lifecycle event is published:
// toolfleet.event.run.<IDToken(run)>.<what>, e.g. what = "step" or "done", followed by
// .<tenant> for a run of tenant.
func RunEventSubject(tenant, run, what string) (string, error) {
	if run == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "run id is empty")
	}
	if err := ValidateToken(what); err != nil {
		return "", err
	}
	return withTenant(runEventPrefix+IDToken(run)+"."+what, tenant)
}

// ToolOfCallSubject returns the tool named by a call subject; ok is false unless subject
// is exactly toolfleet.call.<tool> or toolfleet.call.<tool>.<tenant>.<role> (see
// [ParseCallSubject]).
func ToolOfCallSubject(subject string) (tool string, ok bool) {
	tool, _, ok = ParseCallSubject(subject)
	return tool, ok
}

// ParseCallSubject returns the tool and the caller's identity a call subject names: the
// zero Identity for toolfleet.call.<tool>, tenant and role for
// toolfleet.call.<tool>.<tenant>.<role>. ok is false for a subject of any other shape (a
// wildcard, one or three extra tokens, a byte outside the alphabets).
func ParseCallSubject(subject string) (tool string, caller Identity, ok bool) {
	rest, ok := strings.CutPrefix(subject, callPrefix)
	if !ok {
		return "", Identity{}, false
	}
	tool, rest, hasIdentity := strings.Cut(rest, ".")
	if !isTool(tool) {
		return "", Identity{}, false
	}
	if !hasIdentity {
		return tool, Identity{}, true
	}
	tenant, role, ok := strings.Cut(rest, ".")
	if !ok || !isIdentityToken(tenant) || !isIdentityToken(role) {
		return "", Identity{}, false
	}
	return tool, Identity{Tenant: tenant, Role: role}, true
}

// SubjectTenant returns the tenant a subject of the contract names: the caller's tenant
// of a call, result or approval subject, the run's of a run event; empty for an anonymous
// caller's subject and for any other subject.
func SubjectTenant(subject string) string {
	var tenant string
	switch {
	case strings.HasPrefix(subject, callPrefix):
		_, caller, _ := ParseCallSubject(subject)
		tenant = caller.Tenant
	case strings.HasPrefix(subject, resultPrefix):
		_, _, tenant, _ = ParseResultSubject(subject)
	case strings.HasPrefix(subject, approvalReqPrefix):
		_, _, tenant, _ = ParseApprovalRequestSubject(subject)
	case strings.HasPrefix(subject, approvalAnsPrefix):
		_, _, answerer, _ := ParseApprovalAnswerSubject(subject)
		tenant = answerer.Tenant
	case strings.HasPrefix(subject, runEventPrefix):
		_, _, tenant, _ = ParseRunEventSubject(subject)
	case strings.HasPrefix(subject, cancelPrefix):
		_, _, sender, _ := ParseCancelSubject(subject)
		tenant = sender.Tenant
	case strings.HasPrefix(subject, usagePrefix):
		_, tenant, _ = strings.Cut(subject[len(usagePrefix):], ".")
	}
	return tenant
}

// MsgID is the Nats-Msg-Id of the event id on a subject of tenant: the id itself for an
// anonymous caller, id@tenant otherwise. JetStream drops duplicates by Nats-Msg-Id across
// a whole stream, so without the tenant two tenants that chose the same call id (or
// answered calls of the same id) would drop each other's messages.
func MsgID(tenant, id string) string {
	if tenant == "" {
		return id
	}
	return id + "@" + tenant
}

// TypeForSubject returns the event type a message on subject must have, so that an
// event on the wrong subject is refused.
func TypeForSubject(subject string) (string, bool) {
	switch {
	case strings.HasPrefix(subject, callPrefix):
		return TypeCall, true
	case strings.HasPrefix(subject, resultPrefix):
		return TypeResult, true
	case strings.HasPrefix(subject, dlqPrefix):
		return TypeDeadLetter, true
	case strings.HasPrefix(subject, approvalReqPrefix):
		return TypeApprovalRequest, true
	case strings.HasPrefix(subject, approvalAnsPrefix):
		return TypeApprovalAnswer, true
	case strings.HasPrefix(subject, cancelPrefix):
		return TypeCancel, true
	case strings.HasPrefix(subject, usagePrefix):
		return TypeUsage, true
	case strings.HasPrefix(subject, runEventPrefix):
		// The word is the token after the run, whether or not a tenant follows it.
		if _, what, _, ok := ParseRunEventSubject(subject); ok {
			return RunType(what), true
		}
	}
	return "", false
}

// isIDToken is IDPattern (and tools.NamePattern with max 64) without the regexp: it runs
// for every event encoded and decoded.
func isIDToken(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// PlanSubject is where a planner asks for the next step of run: toolfleet.plan.<run>.
func PlanSubject(run string) (string, error) {
	if err := ValidateID("run id", run); err != nil {
		return "", err
	}
	return planPrefix + run, nil
}
