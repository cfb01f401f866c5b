package events

import (
	"regexp"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Subject roots. Every subject toolfleet uses is built by a function of this file, so
// that permissions, stream filters and publishers agree.
const (
	SubjectRoot        = "toolfleet"
	callPrefix         = "toolfleet.call."
	resultPrefix       = "toolfleet.result."
	eventPrefix        = "toolfleet.event."
	dlqPrefix          = "toolfleet.dlq."
	approvalReqPrefix  = "toolfleet.event.approval.requested."
	approvalAnsPrefix  = "toolfleet.event.approval.answered."
	runEventPrefix     = "toolfleet.event.run."
	planPrefix         = "toolfleet.plan."
	AllCalls           = "toolfleet.call.>"
	AllResults         = "toolfleet.result.>"
	AllEvents          = "toolfleet.event.>"
	AllDeadLetters     = "toolfleet.dlq.>"
	AllApprovalAnswers = "toolfleet.event.approval.answered.>"
	// AllApprovalRequests matches every approval request, of any tool.
	AllApprovalRequests = "toolfleet.event.approval.requested.>"
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

// CallSubject is where calls of tool are published: toolfleet.call.<tool>.
func CallSubject(tool string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	return callPrefix + tool, nil
}

// ResultSubject is where the result of call in run is published:
// toolfleet.result.<run>.<call>, each id as its [IDToken], so any non-empty id works. A
// caller subscribes to toolfleet.result.<run>.* (see [RunResultsSubject]) to gather a
// run's results.
func ResultSubject(run, call string) (string, error) {
	if run == "" || call == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "a result subject needs a run id and a call id (got %q, %q)", run, call)
	}
	return resultPrefix + IDToken(run) + "." + IDToken(call), nil
}

// RunResultsSubject is the filter matching every result of run.
func RunResultsSubject(run string) (string, error) {
	if run == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "run id is empty")
	}
	return resultPrefix + IDToken(run) + ".*", nil
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
// toolfleet.event.approval.requested.<tool>.<IDToken(call)>.
func ApprovalRequestedSubject(tool, call string) (string, error) {
	return approvalSubject(approvalReqPrefix, tool, call)
}

// ApprovalAnsweredSubject is where the answer to the approval of call of tool must be
// published: toolfleet.event.approval.answered.<tool>.<IDToken(call)>. The tool is part
// of the subject so that only the executors serving it consume the answer.
func ApprovalAnsweredSubject(tool, call string) (string, error) {
	return approvalSubject(approvalAnsPrefix, tool, call)
}

func approvalSubject(prefix, tool, call string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	if call == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "call id is empty")
	}
	return prefix + tool + "." + IDToken(call), nil
}

// ParseApprovalAnswerSubject returns the tool and the call token an approval answer's
// subject names; ok is false unless subject is exactly
// toolfleet.event.approval.answered.<tool>.<token>.
func ParseApprovalAnswerSubject(subject string) (tool, callToken string, ok bool) {
	return parseApprovalSubject(approvalAnsPrefix, subject)
}

// ParseApprovalRequestSubject returns the tool and the call token an approval request's
// subject names; ok is false unless subject is exactly
// toolfleet.event.approval.requested.<tool>.<token>.
func ParseApprovalRequestSubject(subject string) (tool, callToken string, ok bool) {
	return parseApprovalSubject(approvalReqPrefix, subject)
}

func parseApprovalSubject(prefix, subject string) (tool, callToken string, ok bool) {
	return parseTwo(subject, prefix, isTool, isToken)
}

// parseTwo returns the two tokens that follow prefix in subject, each passing its rule;
// ok is false unless subject is exactly prefix + first + "." + second.
func parseTwo(subject, prefix string, first, second func(string) bool) (a, b string, ok bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", "", false
	}
	a, b, ok = strings.Cut(rest, ".")
	if !ok || !first(a) || !second(b) {
		return "", "", false
	}
	return a, b, true
}

func isTool(s string) bool { return isIDToken(s, 64) }

func isWord(s string) bool { return wordPattern.MatchString(s) }

// ParseResultSubject returns the run and call tokens a result's subject names; ok is
// false unless subject is exactly toolfleet.result.<run token>.<call token>. The tokens
// are [IDToken]s: compare them with IDToken of an id, not with the id.
func ParseResultSubject(subject string) (runToken, callToken string, ok bool) {
	return parseTwo(subject, resultPrefix, isToken, isToken)
}

// ParseRunEventSubject returns the run token and the event word of a run lifecycle
// event's subject; ok is false unless subject is exactly
// toolfleet.event.run.<run token>.<what> with a valid word ([ValidateToken]).
func ParseRunEventSubject(subject string) (runToken, what string, ok bool) {
	return parseTwo(subject, runEventPrefix, isToken, isWord)
}

// ApprovalAnswersFilter matches every approval answer for tool.
func ApprovalAnswersFilter(tool string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	return approvalAnsPrefix + tool + ".*", nil
}

// RunEventsSubject is the filter matching every lifecycle event of run.
func RunEventsSubject(run string) (string, error) {
	if run == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "run id is empty")
	}
	return runEventPrefix + IDToken(run) + ".*", nil
}

// RunEventSubject is where a run lifecycle event is published:
// toolfleet.event.run.<IDToken(run)>.<what>, e.g. what = "step" or "done".
func RunEventSubject(run, what string) (string, error) {
	if run == "" {
		return "", tools.Errorf(tools.CodeInvalidEvent, "run id is empty")
	}
	if err := ValidateToken(what); err != nil {
		return "", err
	}
	return runEventPrefix + IDToken(run) + "." + what, nil
}

// ToolOfCallSubject returns the tool named by a call subject; ok is false unless subject
// is exactly toolfleet.call.<tool> with a valid tool name (a wildcard, a second token or
// a byte outside the name alphabet is not a tool).
func ToolOfCallSubject(subject string) (tool string, ok bool) {
	tool, ok = strings.CutPrefix(subject, callPrefix)
	if !ok || ValidateTool(tool) != nil {
		return "", false
	}
	return tool, true
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
	case strings.HasPrefix(subject, runEventPrefix):
		rest := strings.TrimPrefix(subject, runEventPrefix)
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			return RunType(rest[i+1:]), true
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
