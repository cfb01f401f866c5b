package events_test

import (
	"errors"
	"regexp"
	"strings"
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
	if got := must(events.CallSubject(events.Identity{}, "get_weather")); got != "toolfleet.call.get_weather" {
		t.Errorf("CallSubject = %s", got)
	}
	if got := must(events.ResultSubject("", "run-1", "call_A")); got != "toolfleet.result.run-1.call_A" {
		t.Errorf("ResultSubject = %s", got)
	}
	if got := events.DeadLetterSubject("echo"); got != "toolfleet.dlq.echo" {
		t.Errorf("DeadLetterSubject = %s", got)
	}
	if got := events.DeadLetterSubject("a.b"); got != "toolfleet.dlq._unknown" {
		t.Errorf("DeadLetterSubject of a bad name = %s", got)
	}
	if got := must(events.ApprovalAnsweredSubject(events.Identity{}, "write_file", "c1")); got != "toolfleet.event.approval.answered.write_file.c1" {
		t.Errorf("ApprovalAnsweredSubject = %s", got)
	}
	if got := must(events.RunEventSubject("", "r1", "done")); got != "toolfleet.event.run.r1.done" {
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

// Tool names that would change which subscribers see a message are refused with a
// message naming the rule; ids of any kind map to a token that changes nothing.
func TestSubjectsRefuseBadTools(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", "tab\t", "é", string(make([]byte, 65))} {
		if _, err := events.CallSubject(events.Identity{}, bad); !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("tool %q: got %v, want invalid_event", bad, err)
		}
	}
	if _, err := events.ResultSubject("", "run", ""); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("empty call id: got %v, want invalid_event", err)
	}
	if _, err := events.RunEventSubject("", "r", "Step"); err == nil {
		t.Error("upper-case event word accepted")
	}
}

// Any CloudEvents id works: one that is a subject token stays itself, any other becomes
// "=" and its hashed form, and the subject keeps exactly its four tokens.
func TestAnyIDMapsToOneToken(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", "a.b", "a*", "a>", "a b", "tab\t", "é",
		"/path/x", string(make([]byte, 129)), "\xff\xfe", "toolfleet.call.>"} {
		tok := events.IDToken(id)
		if !hashedToken.MatchString(tok) {
			t.Errorf("IDToken(%q) = %q, not '=' and 43 base64url characters", id, tok)
		}
		if again := events.IDToken(tok); again != tok {
			t.Errorf("IDToken is not idempotent: %q -> %q -> %q", id, tok, again)
		}
		subj, err := events.ResultSubject("", id, id)
		if err != nil {
			t.Fatalf("ResultSubject(%q): %v", id, err)
		}
		if want := "toolfleet.result." + tok + "." + tok; subj != want {
			t.Errorf("ResultSubject(%q) = %q, want %q", id, subj, want)
		}
	}
	for _, id := range []string{"call_1", "toolu_01A", "6e8bc430-9c3a-11d9-9669-0800200c9a66", strings.Repeat("x", 128)} {
		if got := events.IDToken(id); got != id {
			t.Errorf("IDToken(%q) = %q, want the id itself", id, got)
		}
	}
	// ReplyID: what an answer carries.
	for id, want := range map[string]string{"urn:uuid:1": "urn:uuid:1", "a b": "a b", "": "",
		"a\nb": events.IDToken("a\nb"), "\xff": events.IDToken("\xff")} {
		if got := events.ReplyID(id); got != want {
			t.Errorf("ReplyID(%q) = %q, want %q", id, got, want)
		}
	}
}

var hashedToken = regexp.MustCompile(`^=[A-Za-z0-9_-]{43}$`)

// Distinct ids never share a token, and every token is one subject token that NATS and
// KV keys accept.
func FuzzIDToken(f *testing.F) {
	for _, s := range [][2]string{{"a", "b"}, {"urn:x", "=abc"}, {"call_1", "call_1 "}, {"\xff", "\ufffd"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, tb := events.IDToken(a), events.IDToken(b)
		if a != "" && !kvKey.MatchString(ta) {
			t.Errorf("IDToken(%q) = %q is not a subject token and KV key", a, ta)
		}
		if a != b && ta == tb && !hashedToken.MatchString(a) && !hashedToken.MatchString(b) {
			t.Errorf("IDToken(%q) == IDToken(%q) == %q", a, b, ta)
		}
		if events.IDToken(ta) != ta {
			t.Errorf("IDToken not idempotent on %q", a)
		}
	})
}

var kvKey = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)

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

// Every subject has an exact parser: what a builder makes parses back to its parts, and
// anything else — another root, a missing or extra token, a wildcard — is not a guess
// but a refusal. A tenant, when there is one, is the last token.
func TestParseSubjects(t *testing.T) {
	t.Parallel()
	for _, tenant := range []string{"", "acme"} {
		res, _ := events.ResultSubject(tenant, "run 1", "urn:uuid:1")
		if run, call, te, ok := events.ParseResultSubject(res); !ok || run != events.IDToken("run 1") || call != events.IDToken("urn:uuid:1") || te != tenant {
			t.Errorf("ParseResultSubject(%s) = %s, %s, %s, %v", res, run, call, te, ok)
		}
		ev, _ := events.RunEventSubject(tenant, "r1", "tool_called")
		if run, what, te, ok := events.ParseRunEventSubject(ev); !ok || run != "r1" || what != "tool_called" || te != tenant {
			t.Errorf("ParseRunEventSubject(%s) = %s, %s, %s, %v", ev, run, what, te, ok)
		}
		req, _ := events.ApprovalRequestedSubject(tenant, "write_file", "c1")
		if tool, call, te, ok := events.ParseApprovalRequestSubject(req); !ok || tool != "write_file" || call != "c1" || te != tenant {
			t.Errorf("ParseApprovalRequestSubject(%s) = %s, %s, %s, %v", req, tool, call, te, ok)
		}
		answerer := events.Identity{}
		if tenant != "" {
			answerer = events.Identity{Tenant: tenant, Role: "reviewer"}
		}
		ans, _ := events.ApprovalAnsweredSubject(answerer, "write_file", "c1")
		if tool, call, who, ok := events.ParseApprovalAnswerSubject(ans); !ok || tool != "write_file" || call != "c1" || who != answerer {
			t.Errorf("ParseApprovalAnswerSubject(%s) = %s, %s, %v, %v", ans, tool, call, who, ok)
		}
		if got := events.SubjectTenant(ans); got != tenant {
			t.Errorf("SubjectTenant(%s) = %q, want %q", ans, got, tenant)
		}
	}
	// An answer names its answerer's tenant and role, both or neither: a tenant alone
	// would leave the role, which decides what the answer may let run, unsaid.
	if s, err := events.ApprovalAnsweredSubject(events.Identity{Tenant: "acme"}, "write_file", "c1"); err == nil {
		t.Errorf("ApprovalAnsweredSubject with a tenant and no role = %s, want an error", s)
	}
	for _, bad := range []string{"toolfleet.event.approval.answered.t.c.acme", "toolfleet.event.approval.answered.t.c.acme.*",
		"toolfleet.event.approval.answered.t.c.acme.admin.x", "toolfleet.event.approval.answered.t.c.acme.>", "toolfleet.event.approval.answered.t"} {
		if _, _, _, ok := events.ParseApprovalAnswerSubject(bad); ok {
			t.Errorf("ParseApprovalAnswerSubject(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "toolfleet.result.r", "toolfleet.result.r.c.d.e", "toolfleet.result.r.*", "toolfleet.result.>",
		"toolfleet.result..c", "toolfleet.call.r.c", "toolfleet.result.r.c ", "toolfleet.result.r.c.*", "toolfleet.result.r.c.>",
		"toolfleet.result.r.c.", "toolfleet.result.r.c.a b"} {
		if _, _, _, ok := events.ParseResultSubject(bad); ok {
			t.Errorf("ParseResultSubject(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"toolfleet.event.run.r", "toolfleet.event.run.r.a.b.c", "toolfleet.event.run.r.*", "toolfleet.event.run.r.Done",
		"toolfleet.event.approval.requested.t.c", "toolfleet.event.run.r.done.*"} {
		if _, _, _, ok := events.ParseRunEventSubject(bad); ok {
			t.Errorf("ParseRunEventSubject(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"toolfleet.event.approval.requested.t", "toolfleet.event.approval.requested.t.c.d.e",
		"toolfleet.event.approval.answered.t.c", "toolfleet.event.approval.requested.*.c", "toolfleet.event.approval.requested.t.c.>"} {
		if _, _, _, ok := events.ParseApprovalRequestSubject(bad); ok {
			t.Errorf("ParseApprovalRequestSubject(%q) accepted", bad)
		}
	}
	if f, _ := events.RunEventsSubject("", "r1"); f != "toolfleet.event.run.r1.*" {
		t.Errorf("RunEventsSubject = %s", f)
	}
	if f, _ := events.RunEventsSubject("acme", "r1"); f != "toolfleet.event.run.r1.*.acme" {
		t.Errorf("RunEventsSubject(acme) = %s", f)
	}
	if f, _ := events.TenantRunEventsFilter(""); f != "toolfleet.event.run.*.*" {
		t.Errorf("TenantRunEventsFilter = %s", f)
	}
	if f, _ := events.TenantRunEventsFilter("acme"); f != "toolfleet.event.run.*.*.acme" {
		t.Errorf("TenantRunEventsFilter(acme) = %s", f)
	}
	if _, err := events.TenantRunEventsFilter("*"); err == nil {
		t.Error("TenantRunEventsFilter(*) accepted a wildcard tenant")
	}
	if f, _ := events.RunResultsSubject("acme", "r1"); f != "toolfleet.result.r1.*.acme" {
		t.Errorf("RunResultsSubject(acme) = %s", f)
	}
	for _, bad := range []string{"a.b", "*", ">", "", "a b", strings.Repeat("t", 65)} {
		if _, err := events.ResultSubject(bad, "r", "c"); bad != "" && !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("ResultSubject with tenant %q: %v, want invalid_event", bad, err)
		}
	}
}

// A call's subject names the caller's identity, and only the subject does: tenant and
// role are its last two tokens, each a plain token, and an anonymous call has neither.
func TestCallSubjectIdentity(t *testing.T) {
	t.Parallel()
	anon, _ := events.CallSubject(events.Identity{}, "echo")
	if anon != "toolfleet.call.echo" {
		t.Errorf("anonymous call subject %s", anon)
	}
	id := events.Identity{Tenant: "acme", Role: "admin"}
	subj, err := events.CallSubject(id, "echo")
	if err != nil || subj != "toolfleet.call.echo.acme.admin" {
		t.Fatalf("CallSubject = %s, %v", subj, err)
	}
	if tool, got, ok := events.ParseCallSubject(subj); !ok || tool != "echo" || got != id {
		t.Errorf("ParseCallSubject(%s) = %s, %+v, %v", subj, tool, got, ok)
	}
	if tool, got, ok := events.ParseCallSubject(anon); !ok || tool != "echo" || !got.IsZero() {
		t.Errorf("ParseCallSubject(%s) = %s, %+v, %v", anon, tool, got, ok)
	}
	for _, bad := range []events.Identity{{Tenant: "acme"}, {Role: "admin"}, {Tenant: "a.b", Role: "r"}, {Tenant: "t", Role: "*"},
		{Tenant: "t", Role: ">"}, {Tenant: strings.Repeat("t", 65), Role: "r"}} {
		if _, err := events.CallSubject(bad, "echo"); !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("CallSubject(%+v): %v, want invalid_event", bad, err)
		}
	}
	for _, bad := range []string{"toolfleet.call.echo.acme", "toolfleet.call.echo.acme.admin.x", "toolfleet.call.echo.*.admin",
		"toolfleet.call.echo.acme.>", "toolfleet.call.echo..admin", "toolfleet.call.echo.acme.", "toolfleet.call.*"} {
		if _, _, ok := events.ParseCallSubject(bad); ok {
			t.Errorf("ParseCallSubject(%q) accepted", bad)
		}
	}
}

// FuzzParseSubjects: the parsers never panic, and what they accept is rebuilt exactly.
func FuzzParseSubjects(f *testing.F) {
	for _, s := range []string{"toolfleet.result.r.c", "toolfleet.event.run.r.done", "toolfleet.event.approval.requested.t.c",
		"toolfleet.result.=" + strings.Repeat("A", 43) + ".c", "toolfleet.result.r.c.d", "toolfleet.event.run..x",
		"toolfleet.call.t.a.b", "toolfleet.event.run.r.done.acme"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if run, call, tenant, ok := events.ParseResultSubject(s); ok {
			if got, _ := events.ResultSubject(tenant, run, call); got != s {
				t.Errorf("result %q rebuilt as %q", s, got)
			}
		}
		if run, what, tenant, ok := events.ParseRunEventSubject(s); ok {
			if got, _ := events.RunEventSubject(tenant, run, what); got != s {
				t.Errorf("run event %q rebuilt as %q", s, got)
			}
		}
		if tool, call, tenant, ok := events.ParseApprovalRequestSubject(s); ok {
			if got, _ := events.ApprovalRequestedSubject(tenant, tool, call); got != s {
				t.Errorf("approval request %q rebuilt as %q", s, got)
			}
		}
		if tool, caller, ok := events.ParseCallSubject(s); ok {
			if got, _ := events.CallSubject(caller, tool); got != s {
				t.Errorf("call %q rebuilt as %q", s, got)
			}
		}
	})
}

// A cancel's subject names the tool, the call's token and the sender's tenant and role;
// the parser reads back exactly what the builder wrote and refuses any other shape — the
// shape before roles (a tenant, no role) included: its sender is unknown.
func TestCancelSubject(t *testing.T) {
	t.Parallel()
	for _, sender := range []events.Identity{{}, {Tenant: "acme", Role: "admin"}} {
		s, err := events.CancelSubject(sender, "slow", "c1")
		if err != nil {
			t.Fatal(err)
		}
		want := "toolfleet.event.cancel.slow.c1"
		if !sender.IsZero() {
			want += ".acme.admin"
		}
		if s != want {
			t.Errorf("CancelSubject(%v) = %s, want %s", sender, s, want)
		}
		if tool, call, got, ok := events.ParseCancelSubject(s); !ok || tool != "slow" || call != "c1" || got != sender {
			t.Errorf("ParseCancelSubject(%s) = %s, %s, %v, %v", s, tool, call, got, ok)
		}
		if got := events.SubjectTenant(s); got != sender.Tenant {
			t.Errorf("SubjectTenant(%s) = %q", s, got)
		}
		if typ, ok := events.TypeForSubject(s); !ok || typ != events.TypeCancel {
			t.Errorf("TypeForSubject(%s) = %s, %v", s, typ, ok)
		}
		// The filter of a call's cancels matches every role of the owner's tenant.
		f, err := events.CallCancelsFilter(sender, "slow", "c1")
		if wantF := map[bool]string{true: "toolfleet.event.cancel.slow.c1", false: "toolfleet.event.cancel.slow.c1.acme.*"}[sender.IsZero()]; err != nil || f != wantF {
			t.Errorf("CallCancelsFilter(%v) = %s, %v; want %s", sender, f, err, wantF)
		}
	}
	if s, _ := events.CancelSubject(events.Identity{}, "slow", "urn:x.y"); s != "toolfleet.event.cancel.slow."+events.IDToken("urn:x.y") {
		t.Errorf("an id outside the token alphabet: %s", s)
	}
	for _, bad := range []string{"toolfleet.event.cancel.slow", "toolfleet.event.cancel.slow.*", "toolfleet.event.cancel.>",
		"toolfleet.event.cancel.slow.c1.acme", "toolfleet.event.cancel.slow.c1.acme.admin.x", "toolfleet.event.cancel.slow.c1.acme.*",
		"toolfleet.event.cancel.a b.c1", "toolfleet.event.approval.answered.slow.c1"} {
		if _, _, _, ok := events.ParseCancelSubject(bad); ok {
			t.Errorf("ParseCancelSubject(%q) accepted", bad)
		}
	}
	if _, err := events.CancelSubject(events.Identity{}, "a.b", "c1"); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("bad tool: %v", err)
	}
	for _, bad := range []events.Identity{{Tenant: "a.b", Role: "admin"}, {Tenant: "acme"}, {Role: "admin"}} {
		if _, err := events.CancelSubject(bad, "slow", "c1"); !errors.Is(err, tools.ErrInvalidEvent) {
			t.Errorf("bad sender %+v: %v", bad, err)
		}
	}
	if f, _ := events.CancelsFilter("slow"); f != "toolfleet.event.cancel.slow.>" {
		t.Errorf("CancelsFilter = %s", f)
	}
}

// A run event of a tenant's run has its word before the tenant: its type follows the
// word, not the tenant.
func TestTypeForTenantRunEvent(t *testing.T) {
	t.Parallel()
	if typ, ok := events.TypeForSubject("toolfleet.event.run.r1.tool_started.acme"); !ok || typ != events.RunType("tool_started") {
		t.Errorf("TypeForSubject = %s, %v", typ, ok)
	}
}

func TestRunCancelSubject(t *testing.T) {
	acme := events.Identity{Tenant: "acme", Role: "user"}
	s, err := events.RunCancelSubject(acme, "r1")
	if err != nil || s != "toolfleet.control.cancel.r1.acme.user" {
		t.Fatalf("got %q, %v", s, err)
	}
	if run, who, ok := events.ParseRunCancelSubject(s); !ok || run != "r1" || who != acme {
		t.Fatalf("parsed %q %v %v", run, who, ok)
	}
	if run, who, ok := events.ParseRunCancelSubject("toolfleet.control.cancel.r1"); !ok || run != "r1" || !who.IsZero() {
		t.Fatalf("anonymous: %q %v %v", run, who, ok)
	}
	// A tenant without a role names no one who may act: refused, never taken as some role.
	for _, bad := range []string{"toolfleet.control.cancel.", "toolfleet.control.cancel.r1.acme", "toolfleet.control.cancel.r1.a.b.c",
		"toolfleet.control.cancel.r1.acme.*", "toolfleet.plan.r1"} {
		if _, _, ok := events.ParseRunCancelSubject(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := events.RunCancelSubject(events.Identity{}, "a.b"); err == nil {
		t.Error("a run id with a dot was accepted")
	}
}
