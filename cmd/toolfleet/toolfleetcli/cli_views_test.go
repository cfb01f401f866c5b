package toolfleetcli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// viewScripts are the scripted models of TestCLIShowsWaitingOutcomesAndAnswers: each
// approval's call is followed by another call, so its result is stored with the next
// step's calls.
var viewScripts = map[string]string{
	"history": `
steps:
  - calls: [{name: delete_all, arguments: {where: staging}}]
  - calls: [{name: echo, arguments: {text: after}}]
  - text: done
`,
	"expire": `
steps:
  - calls: [{name: risky, arguments: {}}]
  - calls: [{name: echo, arguments: {text: after}}]
  - text: done
`,
	"fails": `
steps:
  - calls: [{name: fail, arguments: {}}]
  - text: it failed
`,
}

// viewsAPI serves a planner's API (anonymous callers) over a test fleet with the view
// scripts and a tool risky whose approvals expire after expiry; the CLI talks to it.
func viewsAPI(t *testing.T, expiry time.Duration) *planner.Planner {
	t.Helper()
	f := plannertest.StartFleet(t, natstest.Start(t))
	plannertest.StartExecutor(t, f.Srv, f.Cfg, tools.Definition{Type: "function", Name: "risky", Description: "Needs approval.",
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return "ran", nil }, executor.WithApprovalTimeout(expiry))
	models, _ := plannertest.Models(t, viewScripts)
	p, err := planner.New(f.Ctx, f.Srv.Connect(), planner.Config{Models: models, DefaultModel: "history", Events: f.Cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	plannertest.ServeStoppable(t, p.Run)
	natstest.Eventually(t, plannertest.WaitTimeout, "the catalog to list risky", func() bool { _, ok := p.Tool("risky"); return ok })
	srv := httptest.NewServer(plannerapi.Handler(p, plannerapi.Auth{}))
	t.Cleanup(srv.Close)
	t.Setenv("TOOLFLEET_API_URL", srv.URL)
	return p
}

// startWaiting starts a run of model with the CLI and returns its id and its call's,
// once the call waits for an approval.
func startWaiting(t *testing.T, model string, extra ...string) (runID, callID string) {
	t.Helper()
	r := toolfleet(append([]string{"run", "clean up", "--model", model, "-q"}, extra...)...)
	r.check(t, 0)
	runID = strings.TrimSpace(r.stdout)
	natstest.Eventually(t, plannertest.WaitTimeout, "the run's call to wait for an approval", func() bool {
		var run runs.Run
		if json.Unmarshal([]byte(toolfleet("runs", "get", runID, "-o", "json").stdout), &run) != nil || len(run.Awaiting()) == 0 {
			return false
		}
		callID = run.Awaiting()[0].ID
		return true
	})
	return runID, callID
}

// runsLS lists runs with the CLI's filters, as JSON.
func runsLS(t *testing.T, args ...string) []string {
	t.Helper()
	var page runs.RunPage
	r := toolfleet(append([]string{"runs", "ls", "-o", "json"}, args...)...)
	if r.check(t, 0); json.Unmarshal([]byte(r.stdout), &page) != nil {
		t.Fatalf("runs ls %v: %s", args, r.stdout)
	}
	var ids []string
	for _, s := range page.Runs {
		ids = append(ids, s.ID)
	}
	return ids
}

// The CLI shows what the run's record says: a run waiting on a person as such, with
// its deadline; how finished runs went (a failed tool, a denial, clean), filtered by
// outcome and metadata; every answered approval with who answered and when; who
// paused a run and why.
func TestCLIShowsWaitingOutcomesAndAnswers(t *testing.T) {
	p := viewsAPI(t, 3*time.Second)
	ctx := context.Background()

	expired, expiredCall := startWaiting(t, "expire")
	toolfleet("runs", "ls", "--status", "awaiting_approval").check(t, 0, expired, "awaiting_approval until ")
	approved, approvedCall := startWaiting(t, "history", "--metadata", "team=ops,env=prod")
	modified, modifiedCall := startWaiting(t, "history", "--metadata", "team=ops")
	denied, deniedCall := startWaiting(t, "history")
	canceled, canceledCall := startWaiting(t, "history")
	toolfleet("approvals", "approve", approvedCall, "--by", "alice").check(t, 0, "approved")
	toolfleet("approvals", "modify", modifiedCall, `{"where":"dev"}`, "--by", "bob").check(t, 0, "approved with new arguments")
	toolfleet("approvals", "deny", deniedCall, "--reason", "not today").check(t, 0, "denied")
	toolfleet("runs", "cancel", canceled, "--reason", "stop").check(t, 0, "canceled")
	fails := strings.TrimSpace(toolfleet("run", "try", "--model", "fails", "-q").stdout)
	for _, id := range []string{approved, modified, denied, canceled, expired, fails} {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := p.Wait(wctx, id)
		cancel()
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
	}

	// Every answer, approved ones included, with who answered (and who they said
	// they were) and when.
	natstest.Eventually(t, plannertest.WaitTimeout, "the five answers listed", func() bool {
		var page runs.ApprovalPage
		r := toolfleet("approvals", "ls", "--status", "answered", "-o", "json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &page) == nil && len(page.Approvals) == 5
	})
	r := toolfleet("approvals", "ls", "--status", "all")
	r.check(t, 0, "BY", "ANSWERED", "anonymous (alice)", "anonymous (bob)", " ago")
	for _, want := range []struct{ call, status string }{{approvedCall, "approved"}, {modifiedCall, "approved"},
		{deniedCall, "denied"}, {canceledCall, "canceled"}, {expiredCall, "expired"}} {
		if !lineWith(r.stdout, want.call, want.status) {
			t.Errorf("approvals ls --status all: no line with %s %s:\n%s", want.call, want.status, r.stdout)
		}
	}

	// Outcomes at a glance, and their filter.
	if got := runsLS(t, "--outcome", "denied"); !slices.Equal(got, []string{denied, expired}) {
		t.Errorf("runs ls --outcome denied: %v, want %v", got, []string{denied, expired})
	}
	if got := runsLS(t, "--outcome", "tool_errors"); !slices.Equal(got, []string{fails}) {
		t.Errorf("runs ls --outcome tool_errors: %v, want %v", got, []string{fails})
	}
	if got := runsLS(t, "--metadata", "team=ops"); !slices.Equal(got, []string{modified, approved}) {
		t.Errorf("runs ls --metadata team=ops: %v", got)
	}
	if got := runsLS(t, "--metadata", "team=ops", "--metadata", "env=prod"); !slices.Equal(got, []string{approved}) {
		t.Errorf("runs ls --metadata team=ops --metadata env=prod: %v", got)
	}
	ls := toolfleet("runs", "ls")
	ls.check(t, 0, "OUTCOME", "ERRORS/DENIALS", "DURATION", "FINISHED")
	for _, want := range []struct{ id, outcome string }{{fails, "tool_errors 1/0"}, {denied, "denied 0/1"}, {approved, "clean 0/0"}} {
		if !lineWith(ls.stdout, append([]string{want.id}, strings.Fields(want.outcome)...)...) {
			t.Errorf("runs ls: no line with %s %s:\n%s", want.id, want.outcome, ls.stdout)
		}
	}
	toolfleet("runs", "ls", "--outcome", "fine").check(t, 2, `--outcome "fine": want clean, tool_errors, denied`)
	// A call's duration leaves out its time parked for approval, shown apart.
	toolfleet("runs", "get", approved).check(t, 0, "APPROVAL WAIT", "clean: 0 tool errors, 0 denials")

	// A run paused by a caller says who and why.
	paused, pausedCall := startWaiting(t, "history")
	toolfleet("runs", "pause", paused, "--reason", "look").check(t, 0, "pauses at its next step boundary")
	toolfleet("approvals", "approve", pausedCall).check(t, 0, "approved")
	natstest.Eventually(t, plannertest.WaitTimeout, "the run to pause", func() bool {
		return slices.Contains(runsLS(t, "--status", "paused"), paused)
	})
	toolfleet("runs", "get", paused).check(t, 0, "paused:  since", "by anonymous: look")
	toolfleet("runs", "ls", "--status", "paused").check(t, 0, "paused (look)")
}

// lineWith reports whether a line of out holds every one of words, in order.
func lineWith(out string, words ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := line, true
		for _, w := range words {
			i := strings.Index(rest, w)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(w):]
		}
		if ok {
			return true
		}
	}
	return false
}
