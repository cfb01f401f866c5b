package events_test

import (
	"errors"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestSubjects(t *testing.T) {
	t.Parallel()
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := must(events.CallSubject("get_weather")); got != "toolfleet.call.get_weather" {
		t.Errorf("CallSubject = %s", got)
	}
	if got := must(events.ResultSubject("run-1", "call_A")); got != "toolfleet.result.run-1.call_A" {
		t.Errorf("ResultSubject = %s", got)
	}
	if got := events.DeadLetterSubject("echo"); got != "toolfleet.dlq.echo" {
		t.Errorf("DeadLetterSubject = %s", got)
	}
	if got := events.DeadLetterSubject("a.b"); got != "toolfleet.dlq._unknown" {
		t.Errorf("DeadLetterSubject of a bad name = %s", got)
	}
	if got := must(events.ApprovalAnsweredSubject("write_file", "c1")); got != "toolfleet.event.approval.answered.write_file.c1" {
		t.Errorf("ApprovalAnsweredSubject = %s", got)
	}
	if got := must(events.RunEventSubject("r1", "done")); got != "toolfleet.event.run.r1.done" {
		t.Errorf("RunEventSubject = %s", got)
	}
	for subj, want := range map[string]string{
		"toolfleet.call.x": events.TypeCall, "toolfleet.result.r.c": events.TypeResult,
		"toolfleet.dlq.x": events.TypeDeadLetter, "toolfleet.event.approval.requested.x.c": events.TypeApprovalRequest,
		"toolfleet.event.approval.answered.x.c": events.TypeApprovalAnswer, "toolfleet.event.run.r.step": "io.toolfleet.run.step",
	} {
		if got, ok := events.TypeForSubject(subj); !ok || got != want {
			t.Errorf("TypeForSubject(%s) = %s, %v; want %s", subj, got, ok, want)
		}
	}
}

// Tokens that would change which subscribers see a message are refused with a message
// naming the rule.
func TestSubjectsRefuseBadTokens(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", "tab\t", "é", string(make([]byte, 129))} {
		if _, err := events.ResultSubject("run", bad); !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("call id %q: got %v, want invalid_event", bad, err)
		}
		if _, err := events.ResultSubject(bad, "call"); !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("run id %q: got %v, want invalid_event", bad, err)
		}
		if _, err := events.CallSubject(bad); !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("tool %q: got %v, want invalid_event", bad, err)
		}
	}
	if _, err := events.RunEventSubject("r", "Step"); err == nil {
		t.Error("upper-case event word accepted")
	}
}

// The hand-written token check agrees with the documented patterns.
func FuzzIDPattern(f *testing.F) {
	for _, s := range []string{"", "a", "a.b", "call_1", "toolu_01A", "x>", "é", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := events.ValidateID("id", s) == nil, events.IDPattern.MatchString(s); got != want {
			t.Errorf("ValidateID(%q) ok=%v, IDPattern says %v", s, got, want)
		}
		if got, want := events.ValidateTool(s) == nil, tools.NamePattern.MatchString(s); got != want {
			t.Errorf("ValidateTool(%q) ok=%v, NamePattern says %v", s, got, want)
		}
	})
}
