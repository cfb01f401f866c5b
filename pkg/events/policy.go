package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Policy hooks. A policy hook is a [Hook] asked before a call runs whether it may: the
// hook of a run (asked by the planner before it publishes each call of the run, and of
// its nested runs) or the hook of a tools-file entry (asked by the executor before it
// runs, or parks for approval, each call of that tool, whoever published it). It gets a
// [PolicyRequest] as JSON and answers a [PolicyAnswer]:
//
//	→ {"level":"run","tool":"delete_all","call_id":"r1-0-0","run_id":"r1","step":0,
//	   "arguments":{"where":"prod"},"caller":{"tenant":"acme","role":"dev"},"validated":true}
//	← {"decision":"deny","reason":"prod is off limits"}
//	← {"decision":"modify","arguments":{"where":"staging"}}
//	← {"decision":"allow"}
//
// deny: the call is answered status denied (code denied) with the reason, and its tool
// never runs. modify: the new arguments are validated again against the tool's schema;
// invalid ones refuse the call (status invalid, the validator's messages), valid ones
// run instead of the original, which the call's record keeps. No answer within the
// hook's timeout, or one that is not a valid PolicyAnswer, counts as its onError:
// "deny" (the default: a policy fails closed) or "allow".

// Levels of a policy hook: where it is declared, and so who asks it.
const (
	PolicyLevelRun  = "run"  // a run's policyHook, asked by the planner
	PolicyLevelTool = "tool" // a tools-file entry's policyHook, asked by the executor
)

// What a policy hook's onError may be; empty is PolicyOnErrorDeny.
const (
	PolicyOnErrorDeny  = "deny"
	PolicyOnErrorAllow = "allow"
)

// CheckPolicyHook reports what is wrong with h as a policy hook declared as field.
func CheckPolicyHook(field string, h Hook) error {
	return h.Check(field, PolicyOnErrorDeny, PolicyOnErrorAllow)
}

// PolicyRequest is what a policy hook is asked: one call, before it runs.
type PolicyRequest struct {
	// Level is PolicyLevelRun or PolicyLevelTool.
	Level  string `json:"level"`
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	RunID  string `json:"run_id"`
	// Step is the run's step that made the call (level run only; 0 from an executor).
	Step int `json:"step"`
	// Arguments are the call's arguments, validated against the tool's schema unless
	// Validated is false. A call whose arguments went by reference carries ArgumentsRef
	// instead (level tool): read them from the payloads stream ([PayloadRef]).
	Arguments    json.RawMessage `json:"arguments,omitempty"`
	ArgumentsRef *PayloadRef     `json:"arguments_ref,omitempty"`
	Validated    bool            `json:"validated"`
	// Metadata is the caller's metadata of the call (a run's metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Caller is the identity the call is made with: at level tool, the one its subject
	// carries (NATS permissions guard it); at level run, the run's.
	Caller Identity `json:"caller,omitzero"`
}

// PolicyDecision is a policy hook's verdict.
type PolicyDecision string

// The verdicts of a policy hook.
const (
	PolicyAllow  PolicyDecision = "allow"
	PolicyDeny   PolicyDecision = "deny"
	PolicyModify PolicyDecision = "modify"
)

// PolicyAnswer is a policy hook's answer. Arguments are required with modify (a JSON
// object: the call's new arguments) and refused with the other decisions; Reason is
// shown to the caller (the model) on a deny and recorded with any decision.
type PolicyAnswer struct {
	Decision  PolicyDecision  `json:"decision"`
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Check reports why a is not a usable answer.
func (a PolicyAnswer) Check() error {
	switch a.Decision {
	case PolicyAllow, PolicyDeny:
		if len(a.Arguments) > 0 && !bytes.Equal(bytes.TrimSpace(a.Arguments), []byte("null")) {
			return fmt.Errorf("arguments come only with decision modify, not %s", a.Decision)
		}
	case PolicyModify:
		if t := bytes.TrimSpace(a.Arguments); len(t) == 0 || t[0] != '{' {
			return fmt.Errorf("decision modify needs the new arguments, a JSON object")
		}
	default:
		return fmt.Errorf(`decision must be "allow", "deny" or "modify", got %q`, a.Decision)
	}
	return nil
}

// PolicyRecord is the audit record of a policy hook's decision on a call, in the call's
// result (the tool's hook) and in the planner's record of the call (every hook asked):
// which hook, what it decided and why, when, and, when it modified the arguments, the
// arguments it was asked with beside the ones it gave. Error is set when the hook could
// not be asked or gave no usable answer: Decision is then its onError.
type PolicyRecord struct {
	Level    string         `json:"level"`
	Hook     string         `json:"hook"`
	Decision PolicyDecision `json:"decision"`
	Reason   string         `json:"reason,omitempty"`
	Error    string         `json:"error,omitempty"`
	At       time.Time      `json:"at"`
	// ArgumentsOriginal and ArgumentsModified are set only on a modify; arguments asked
	// with by reference are not copied: ArgumentsOriginalRef points at them.
	ArgumentsOriginal    json.RawMessage `json:"arguments_original,omitempty"`
	ArgumentsOriginalRef *PayloadRef     `json:"arguments_original_ref,omitempty"`
	ArgumentsModified    json.RawMessage `json:"arguments_modified,omitempty"`
}

// Denial is the error a call denied by the record's hook is answered with (code
// denied): the hook's reason, or why the hook could not be asked.
func (r PolicyRecord) Denial(tool string) *tools.Error {
	msg := fmt.Sprintf("call of %q was denied by the policy hook %s", tool, r.Hook)
	switch {
	case r.Error != "":
		msg = fmt.Sprintf("call of %q was denied: the policy hook %s gave no usable answer (%s), and its onError is deny", tool, r.Hook, r.Error)
	case r.Reason != "":
		msg += ": " + r.Reason
	default:
		msg += " (no reason given)"
	}
	return &tools.Error{Code: tools.CodeDenied, Message: msg}
}

// InvalidModification is the error a call is answered with when the arguments the
// record's hook gave break the tool's schema: invalid_tool_input with the validator's
// messages (from err), saying that the hook's arguments, not the caller's, are at fault.
func (r PolicyRecord) InvalidModification(tool string, err error) *tools.Error {
	te := tools.AsError(err, tools.CodeInvalidInput)
	out := *te
	out.Message = fmt.Sprintf("call of %q was not run: the policy hook %s modified its arguments, and the new ones are invalid: %s", tool, r.Hook, te.Message)
	return &out
}
