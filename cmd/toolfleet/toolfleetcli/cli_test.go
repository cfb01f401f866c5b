package toolfleetcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolfleet/toolfleet/cmd/executor/executorcli"
	"github.com/toolfleet/toolfleet/cmd/picker/pickercli"
	"github.com/toolfleet/toolfleet/cmd/planner/plannercli"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// cliResult is what one command line did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// toolfleet runs the command line in process, as a user runs the binary.
func toolfleet(args ...string) cliResult {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := MainContext(ctx, args, &out, &errOut)
	return cliResult{code, out.String(), errOut.String()}
}

func (r cliResult) check(t *testing.T, code int, stdout ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("the output lacks %q\nstdout:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

// startRun starts the scripted run (it stops at write_file for an approval) and
// returns its id and write_file's call id once the call waits.
func startRun(t *testing.T) (runID, callID string) {
	t.Helper()
	r := toolfleet(append([]string{"run", "Total the orders", "-o", "json", "--tools"}, strings.Join(demoTools, ","))...)
	r.check(t, 0)
	var run runs.Run
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || run.ID == "" {
		t.Fatalf("run -o json: %v\n%s", err, r.stdout)
	}
	natstest.Eventually(t, 30*time.Second, "write_file waits for an approval", func() bool {
		var page runs.ApprovalPage
		r := toolfleet("approvals", "ls", "-o", "json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil {
			return false
		}
		for _, a := range page.Approvals {
			if a.RunID == run.ID && a.Tool == "write_file" {
				callID = a.CallID
				return true
			}
		}
		return false
	})
	return run.ID, callID
}

// Every client command against a real fleet (toolfleet dev in process): tables, JSON,
// and errors with their exit codes.
func TestCLI(t *testing.T) {
	opstest.Env(t, map[string]string{"TOOLFLEET_MODEL": "", "XDG_CONFIG_HOME": t.TempDir(), "HOME": t.TempDir()})
	a, stop := startDev(t, DevOptions{HTTPAddr: ":0", Out: io.Discard})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	t.Setenv("TOOLFLEET_API_URL", a.API)
	t.Setenv("TOOLFLEET_NATS_URL", a.NATS)

	// A run approved while it is watched: the live view, then the run.
	runID, callID := startRun(t)
	toolfleet("approvals", "ls").check(t, 0, "CALL", callID, "write_file", "pending")
	watched := make(chan cliResult, 1)
	go func() { watched <- toolfleet("runs", "watch", runID) }()
	toolfleet("approvals", "approve", callID, "--reason", "fine").check(t, 0, "call "+callID+" approved")
	late := toolfleet("approvals", "deny", callID)
	late.check(t, 1, "409 Conflict")
	w := <-watched
	w.check(t, 0, "→ get_time", "✗ calculator invalid_tool_input", "? write_file waits for an approval", ": approve by anonymous: fine",
		"done: completed", "answer: The orders total 84")
	toolfleet("runs", "get", runID).check(t, 0, "run "+runID+": done (completed)", "STEP", "read_file", "answer: The orders total 84")
	var got runs.Run
	r := toolfleet("runs", "get", runID, "-o", "json")
	if r.check(t, 0); json.Unmarshal([]byte(r.stdout), &got) != nil || got.Termination != "completed" || len(got.Calls) != 6 {
		t.Errorf("runs get -o json: %s", r.stdout)
	}
	// The run started when it was created, before its first step (the started event is
	// published after the planner took that step).
	started := got.CreatedAt.Local().Format("15:04:05.000") + " run started"
	if lines := strings.Split(w.stdout, "\n"); !strings.HasPrefix(lines[0], started) || len(lines) < 2 || lines[1][:12] < lines[0][:12] {
		t.Errorf("runs watch, want %q first and no line before it in time:\n%s", started, w.stdout)
	}
	// -o json prints the API's document whole: every field, as the API wrote it.
	var printed, served any
	if err := json.Unmarshal([]byte(r.stdout), &printed); err != nil {
		t.Fatal(err)
	}
	call(t, "GET", a.API+"/v1/runs/"+runID, "", &served)
	if !reflect.DeepEqual(printed, served) {
		t.Errorf("runs get -o json is not GET /v1/runs/%s:\nprinted: %s\nserved:  %v", runID, r.stdout, served)
	}
	toolfleet("runs", "messages", runID).check(t, 0, "INDEX", "0      user       Total the orders", "→ write_file", "11     assistant  The orders total 84")
	toolfleet("runs", "ls").check(t, 0, "ID", "STATUS", runID, "Total the orders")
	var page runs.RunPage
	r = toolfleet("runs", "ls", "--status", "done", "-q", "total THE", "-o", "json")
	if r.check(t, 0); json.Unmarshal([]byte(r.stdout), &page) != nil || len(page.Runs) != 1 || page.Runs[0].ID != runID {
		t.Errorf("runs ls --status done -q: %s", r.stdout)
	}
	toolfleet("runs", "ls", "--since", "yesterday").check(t, 2, "--since")
	toolfleet("runs", "ls", "--status", "bogus").check(t, 2, `--status "bogus": want running, awaiting_approval, paused, done`)
	toolfleet("runs", "ls", "--outcome", "bogus").check(t, 2, `--outcome "bogus": want clean, tool_errors, denied`)
	toolfleet("runs", "ls", "--status", "paused").check(t, 0, "ID")
	// Rerun from its last step (the answer), then compare the run and its fork.
	last := strconv.Itoa(got.Steps - 1)
	toolfleet("runs", "fork", runID).check(t, 2, "--from-step")
	r = toolfleet("runs", "fork", runID, "--from-step", last, "--wait", "-o", "json")
	var fork runs.Run
	if r.check(t, 0); json.Unmarshal([]byte(r.stdout), &fork) != nil || fork.ForkedFrom == nil || fork.ForkedFrom.Run != runID {
		t.Errorf("runs fork -o json: %s", r.stdout)
	}
	toolfleet("runs", "fork", runID, "--from-step", "99").check(t, 1, "400 Bad Request", "fromStep")
	toolfleet("runs", "diff", runID, fork.ID).check(t, 0, "STEP A", last+" steps shared", "0 of 1 steps changed")
	toolfleet("runs", "diff", runID, "no-such-run").check(t, 1, "404 Not Found")
	// A follow-up: the run reopens and the scripted model's repeating last step answers.
	toolfleet("runs", "send", runID, "Thanks.", "--wait").check(t, 0, "done (completed)", "offline scripted demo model")
	toolfleet("runs", "watch", runID, "-o", "json").check(t, 0, `"termination":"completed"`, "offline scripted demo model")

	// Denied, and the run says why; modified; canceled.
	runID, callID = startRun(t)
	toolfleet("approvals", "deny", callID, "--reason", "not today").check(t, 0, "denied")
	toolfleet("run", "x", "--wait", "--follow").check(t, 2, "not both")
	r = toolfleet("runs", "watch", runID)
	r.check(t, 0, "The report was not approved")
	runID, callID = startRun(t)
	toolfleet("approvals", "modify", callID, "not json").check(t, 2, "not JSON")
	toolfleet("approvals", "modify", callID, `{"path":"other.txt","content":"changed\n"}`).check(t, 0, "approved with new arguments")
	toolfleet("runs", "watch", runID).check(t, 0, "done: completed")
	runID, _ = startRun(t)
	toolfleet("runs", "cancel", runID, "--reason", "stop").check(t, 0, "canceled", "stop")
	toolfleet("runs", "cancel", runID).check(t, 1, "409 Conflict", "has ended already")
	toolfleet("runs", "watch", runID).check(t, 1, "ended canceled")

	// Paused at the step boundary after its approval, then resumed to its end.
	runID, callID = startRun(t)
	toolfleet("runs", "pause", runID, "--reason", "look").check(t, 0, "pauses at its next step boundary")
	toolfleet("approvals", "approve", callID).check(t, 0, "approved")
	natstest.Eventually(t, 30*time.Second, "the run to pause", func() bool {
		var run runs.Run
		return json.Unmarshal([]byte(toolfleet("runs", "get", runID, "-o", "json").stdout), &run) == nil && run.Status == runs.StatusPaused
	})
	toolfleet("runs", "resume", runID, "--compact", "0", "--summary", "x").check(t, 2, "FROM:TO")
	// The model's view: the indices resume's --drop and --compact take.
	toolfleet("runs", "messages", runID, "--view", "model").check(t, 0, "INDEX", "0      user       Total the orders", "← write_file")
	toolfleet("runs", "messages", runID, "--view", "other").check(t, 2, `--view "other"`)
	toolfleet("runs", "resume", runID, "--max-steps", "20").check(t, 0, "resumed (running)")
	toolfleet("runs", "watch", runID).check(t, 0, "done: completed")
	toolfleet("runs", "resume", runID).check(t, 1, "409 Conflict", "not paused")
	toolfleet("runs", "get", "no-such-run").check(t, 1, "404 Not Found")
	// -q prints the id alone, for a script's id=$(toolfleet run ... -q).
	r = toolfleet("run", "Quietly", "-q", "--tools", "calculator")
	if r.check(t, 0); !regexp.MustCompile(`^r\w+\n$`).MatchString(r.stdout) {
		t.Errorf("run -q printed %q, want the run's id alone", r.stdout)
	}
	// The quiet run may have completed already: a cancel then is a 409, not a failure.
	if c := toolfleet("runs", "cancel", strings.TrimSpace(r.stdout)); c.code != 0 && !strings.Contains(c.stderr, "has ended already") {
		t.Errorf("canceling the quiet run: exit %d: %s%s", c.code, c.stdout, c.stderr)
	}
	toolfleet("run", "x", "-q", "--wait").check(t, 2, "-q prints only the run's id")
	// A run that pauses by itself after every step, and one with a cost budget (which
	// this dev, with no price table, refuses: the budget reached the planner).
	r = toolfleet("run", "Total the orders", "--tools", "get_time,list_dir", "--pause", "--pause-after", "list_dir", "-o", "json")
	var paused runs.Run
	if r.check(t, 0); json.Unmarshal([]byte(r.stdout), &paused) != nil || paused.PauseOn == nil ||
		!paused.PauseOn.AfterEveryStep || !slices.Equal(paused.PauseOn.AfterTools, []string{"list_dir"}) {
		t.Errorf("run --pause --pause-after list_dir: %s", r.stdout)
	}
	natstest.Eventually(t, 30*time.Second, "the run to pause after its first step", func() bool {
		var run runs.Run
		return json.Unmarshal([]byte(toolfleet("runs", "get", paused.ID, "-o", "json").stdout), &run) == nil && run.Status == runs.StatusPaused
	})
	toolfleet("runs", "cancel", paused.ID).check(t, 0, "canceled")
	toolfleet("run", "x", "--cost-budget", "0.5").check(t, 1, "limits.costBudget needs a price")
	toolfleet("run", "x", "--cost-budget", "-1").check(t, 2, "--cost-budget")

	// Tools and direct calls.
	toolfleet("tools", "ls").check(t, 0, "NAME", "EXECUTORS", "calculator", "write_file")
	toolfleet("tools", "show", "calculator").check(t, 0, "calculator:", "safe: yes", `"expression"`)
	toolfleet("tools", "show", "nope").check(t, 1, `no tool "nope"`)
	toolfleet("call", "calculator", `{"expression":"6*7"}`).check(t, 0, `"result": 42`)
	toolfleet("call", "calculator", `{"expression":"6*7"}`, "-o", "json").check(t, 0, `"status": "ok"`, `"executor"`)
	toolfleet("call", "calculator", `{"expr":"6*7"}`).check(t, 1, "calculator: invalid_tool_input")
	toolfleet("call", "calculator", `{`).check(t, 2, "not JSON")

	// Where the API is: a flag over the environment, the context file, nothing there.
	ctxFile := filepath.Join(t.TempDir(), "context.json")
	if err := os.WriteFile(ctxFile, []byte(`{"apiUrl":"`+a.API+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLFLEET_API_URL", "")
	toolfleet("tools", "ls", "--context", ctxFile).check(t, 0, "calculator")
	dead := "http://" + opstest.FreeAddr(t)
	toolfleet("tools", "ls", "--context", ctxFile, "--api-url", dead).check(t, 1, "no answer from the planner API at "+dead)
	if err := os.WriteFile(ctxFile, []byte(`{"apiUrl":`), 0o600); err != nil {
		t.Fatal(err)
	}
	toolfleet("tools", "ls", "--context", ctxFile).check(t, 2, "the context file")
	toolfleet("tools", "ls", "--api-url", "localhost:8080").check(t, 2, "want http://host:port")
	toolfleet("tools", "ls", "--api-url", a.API, "-o", "yaml").check(t, 2, "want table or json")
}

// Help exits 0 with usage for every command; version and completion work; a bad
// command line exits 2.
func TestCLIHelpVersionAndUsage(t *testing.T) {
	opstest.Env(t, nil)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		path := strings.Fields(cmd.CommandPath())[1:]
		toolfleet(append(path, "--help")...).check(t, 0, "sage")
		toolfleet(append([]string{"help"}, path...)...).check(t, 0, "sage")
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	toolfleet("-h").check(t, 0, "Drive a fleet:", "Exit codes:")
	toolfleet("dev", "-h").check(t, 0, "-nats-port")
	if r := toolfleet("dev", "-h"); strings.Contains(r.stderr+r.stdout, "-calls") {
		t.Errorf("dev -h lists demo's flags:\n%s", r.stderr)
	}
	toolfleet("health", "-h").check(t, 0, "-ops-addr")
	toolfleet("version").check(t, 0, "toolfleet ", "go1.")
	toolfleet("version", "-o", "json").check(t, 0, `"program": "toolfleet"`, `"goVersion"`)
	toolfleet("completion", "bash").check(t, 0, "bash completion")
	toolfleet("completion", "zsh").check(t, 0, "compdef")
	toolfleet().check(t, 2, "want a command")
	toolfleet("nonsense").check(t, 2, `unknown command "nonsense"`)
	toolfleet("run").check(t, 2, "accepts 1 arg")
	toolfleet("runs", "ls", "--bogus").check(t, 2, "unknown flag: --bogus")
	toolfleet("dev", "-bogus").check(t, 2, "unknown flag: --bogus")
}

// Every program: help and -h exit 0 with usage, version prints the build, a bad flag
// exits 2 (cmd/executor, cmd/planner and cmd/picker are ops.Main over these).
func TestProgramsHelpVersionExitCodes(t *testing.T) {
	opstest.Env(t, nil)
	type program struct {
		name string
		main func(args []string, stdout, stderr io.Writer) int
	}
	ctx := context.Background()
	for _, p := range []program{
		{"executor", func(a []string, o, e io.Writer) int {
			return ops.MainContext(ctx, "executor", a, o, e, executorcli.Parse, executorcli.Run)
		}},
		{"planner", func(a []string, o, e io.Writer) int {
			return ops.MainContext(ctx, "planner", a, o, e, plannercli.Parse, plannercli.Run)
		}},
		{"picker", func(a []string, o, e io.Writer) int {
			return ops.MainContext(ctx, "picker", a, o, e, pickercli.Parse, pickercli.Run)
		}},
	} {
		for _, tc := range []struct {
			args []string
			code int
			says string
		}{
			{[]string{"-h"}, 0, "-ops-addr"},
			{[]string{"--help"}, 0, "-ops-addr"},
			{[]string{"help"}, 0, "-ops-addr"},
			{[]string{"version"}, 0, p.name + " "},
			{[]string{"-no-such-flag"}, 2, "bad configuration"},
			// -h says what the program is before its flags.
			{[]string{"-h"}, 0, "Usage: " + p.name + " [flags]"},
			{[]string{"-h"}, 0, "The toolfleet " + p.name + ": "},
		} {
			var out, errOut bytes.Buffer
			if code := p.main(tc.args, &out, &errOut); code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.says) {
				t.Errorf("%s %q: exit %d, want %d saying %q:\n%s%s", p.name, tc.args, code, tc.code, tc.says, out.String(), errOut.String())
			}
		}
	}
	// The planner's help names where its model comes from.
	var help bytes.Buffer
	if ops.MainContext(ctx, "planner", []string{"-h"}, &help, &help, plannercli.Parse, plannercli.Run); !strings.Contains(help.String(), "TOOLFLEET_MODEL") {
		t.Errorf("planner -h does not mention TOOLFLEET_MODEL:\n%s", help.String())
	}
	// picker eval: -h is help, a bad flag a configuration error.
	if err := pickercli.Eval(ctx, []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("picker eval -h: %v", err)
	}
	if err := pickercli.Eval(ctx, []string{"-folds", "1"}, io.Discard); !errors.Is(err, ops.ErrConfig) {
		t.Errorf("picker eval -folds 1: %v, want a configuration error", err)
	}
}

// call --tenant/--role calls as that caller: a tool kept to one tenant's role answers
// that caller and refuses the anonymous caller and another role, as executors decide
// from the call's subject.
func TestCLICallAsTenant(t *testing.T) {
	opstest.Env(t, map[string]string{"TOOLFLEET_MODEL": "", "XDG_CONFIG_HOME": t.TempDir(), "HOME": t.TempDir()})
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(toolsFile, []byte(`tools:
  - name: acme_echo
    description: Echo the arguments, for acme's admins only.
    safe: true
    tenants: [acme]
    roles: [admin]
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    command: {argv: [cat], timeout: 5s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, stop := startDev(t, DevOptions{HTTPAddr: ":0", Out: io.Discard, Fleet: Options{ToolsFile: toolsFile}})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	t.Setenv("TOOLFLEET_NATS_URL", a.NATS)
	toolfleet("call", "acme_echo", `{"text":"hi"}`, "--tenant", "acme", "--role", "admin").check(t, 0, `"text": "hi"`)
	toolfleet("call", "acme_echo", `{"text":"hi"}`).check(t, 1, "acme_echo: forbidden")
	toolfleet("call", "acme_echo", `{"text":"hi"}`, "--tenant", "acme", "--role", "viewer").check(t, 1, "acme_echo: forbidden")
	toolfleet("call", "acme_echo", `{"text":"hi"}`, "--tenant", "acme").check(t, 2, "--tenant and --role go together")
	toolfleet("call", "acme_echo", `{"text":"hi"}`, "--tenant", "acme", "--role", "a.b").check(t, 2, `role "a.b" is not allowed`)
}

// An event -o json cannot print is an error naming it, not an empty line.
func TestLiveViewRefusesAnEventItCannotPrint(t *testing.T) {
	var out strings.Builder
	v := newLiveView(&out, true, time.Time{})
	err := v.show(runs.Event{Seq: 7, What: "tool_result", Data: runs.EventData{Detail: json.RawMessage(`{"status":`)}})
	if err == nil || !strings.Contains(err.Error(), "event 7 (tool_result)") {
		t.Errorf("show: %v, want an error naming event 7", err)
	}
	if out.Len() != 0 {
		t.Errorf("show printed %q", out.String())
	}
}

// A call that took under a millisecond shows how long it took, not "-" (which is for a
// call not finished).
func TestShowRunFastCall(t *testing.T) {
	called := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	finished := called.Add(412 * time.Microsecond)
	var out strings.Builder
	c := &cli{stdout: &out, output: "table"}
	err := c.showRun(&runs.Run{ID: "r1", Status: runs.StatusDone, Termination: "completed", CreatedAt: called,
		Calls: []runs.Call{{ID: "r1-1", Name: "echo", Status: "ok", CalledAt: called, FinishedAt: &finished},
			{ID: "r1-2", Name: "slow", Status: "pending", CalledAt: called}}})
	if err != nil {
		t.Fatal(err)
	}
	fast, pending := regexp.MustCompile(`r1-1\s+echo\s+ok\s+0\s+412µs`), regexp.MustCompile(`r1-2\s+slow\s+pending\s+0\s+-`)
	if !fast.MatchString(out.String()) || !pending.MatchString(out.String()) {
		t.Errorf("the calls' durations:\n%s", out.String())
	}
}
