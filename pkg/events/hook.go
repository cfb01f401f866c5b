package events

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Hook is a service toolfleet asks something over NATS request/reply, so that any
// language can answer it: the planner's stop hook, and the policy hooks ([PolicyRequest])
// of a run or of a tools-file entry. Subject is where it listens (one literal subject,
// outside toolfleet's own and the server's), Timeout how long an answer may take (zero:
// [DefaultHookTimeout], at most [MaxHookTimeout]), and OnError what a missing, late or
// unreadable answer counts as; each kind of hook names its choices and its default.
type Hook struct {
	Subject string         `json:"subject"`
	Timeout tools.Duration `json:"timeout,omitempty"`
	OnError string         `json:"onError,omitempty"`
}

// Bounds of a hook's wait.
const (
	DefaultHookTimeout = 2 * time.Second
	MaxHookTimeout     = 10 * time.Second
)

// Check reports, naming the setting field (e.g. "stopHook"), what is wrong with h: a
// subject that is not one literal subject or is reserved, a timeout out of range, an
// onError that is not one of onErrors (empty is allowed: the first is the default).
func (h Hook) Check(field string, onErrors ...string) error {
	if err := ValidHookSubject(h.Subject); err != nil {
		return fmt.Errorf("%s.subject: %v", field, err)
	}
	if h.Timeout < 0 || h.Timeout.D() > MaxHookTimeout {
		return fmt.Errorf("%s.timeout must be between 1ms and %s, got %s", field, MaxHookTimeout, h.Timeout.D())
	}
	if h.OnError != "" && !slices.Contains(onErrors, h.OnError) {
		return fmt.Errorf("%s.onError must be %s, got %q", field, strings.Join(onErrors, " or "), h.OnError)
	}
	return nil
}

// Wait is how long the hook's answer is waited for.
func (h Hook) Wait() time.Duration {
	if h.Timeout <= 0 {
		return DefaultHookTimeout
	}
	return h.Timeout.D()
}

// ValidHookSubject refuses what is not one literal NATS subject, and toolfleet's own and
// the server's subjects: a hook must not make toolfleet publish into the fleet's streams.
func ValidHookSubject(s string) error {
	if s == "" || len(s) > 256 {
		return fmt.Errorf("give a NATS subject of at most 256 bytes, got %q", s)
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("%q is not a literal NATS subject", s)
		}
	}
	if strings.HasPrefix(s, "toolfleet.") || strings.HasPrefix(s, "$") || strings.HasPrefix(s, "_INBOX.") {
		return fmt.Errorf("%q is reserved (toolfleet.*, $*, _INBOX.*)", s)
	}
	return nil
}

// TraceHeader is the W3C trace context as headers of a hook's request (traceparent,
// tracestate), so that a hook can join the caller's trace; nil without one.
func TraceHeader(traceParent, traceState string) nats.Header {
	if traceParent == "" {
		return nil
	}
	h := nats.Header{"traceparent": []string{traceParent}}
	if traceState != "" {
		h["tracestate"] = []string{traceState}
	}
	return h
}
