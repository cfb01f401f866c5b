package planner

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const stopScript = plannertest.StopScript

// Declarative stop conditions end the run once the matching call's step has its results,
// with that call's output as the answer.
func TestStopWhen(t *testing.T) {
	b := setup(t, map[string]string{"main": stopScript})
	tests := []struct {
		name   string
		cond   StopCondition
		answer string
		detail string
	}{
		{"tool succeeded", StopCondition{Tool: "echo"}, `{"text":"the treasure is here"}`, "stopWhen[0]: echo succeeded"},
		{"output contains", StopCondition{OutputContains: "treasure"}, `{"text":"the treasure is here"}`, `containing "treasure"`},
		{"output matches", StopCondition{Tool: "add", OutputMatches: `"sum":\s*5\b`}, `{"sum":5}`, `add succeeded with an output matching`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := b.run(t, StartRequest{Input: "go", Tools: []string{"add", "echo"}, StopWhen: []StopCondition{tt.cond}})
			if run.Termination != TerminationStopCondition || !strings.Contains(run.Detail, tt.detail) {
				t.Fatalf("run ended %s (%s), want stop_condition with %q", run.Termination, run.Detail, tt.detail)
			}
			var got, want any
			if json.Unmarshal([]byte(run.Answer), &got) != nil || json.Unmarshal([]byte(tt.answer), &want) != nil || !jsonEqual(got, want) {
				t.Fatalf("answer %s, want %s", run.Answer, tt.answer)
			}
			if len(run.Calls) != 3 || run.View().Steps != 2 {
				t.Fatalf("%d calls in %d steps: the run should stop after step 1", len(run.Calls), run.View().Steps)
			}
		})
	}
	// A condition that never matches leaves the run alone.
	run := b.run(t, StartRequest{Input: "go", Tools: []string{"add", "echo"}, StopWhen: []StopCondition{{Tool: "add", OutputContains: "42"}}})
	if run.Termination != TerminationCompleted {
		t.Fatalf("run ended %s (%s)", run.Termination, run.Detail)
	}
	for _, bad := range []StartRequest{
		{Input: "go", StopWhen: []StopCondition{{}}},
		{Input: "go", StopWhen: []StopCondition{{OutputMatches: "("}}},
		{Input: "go", StopWhen: []StopCondition{{Tool: "not a tool"}}},
		{Input: "go", StopHook: &StopHook{Subject: "toolfleet.call.add"}},
		{Input: "go", StopHook: &StopHook{Subject: "hooks.*"}},
		{Input: "go", StopHook: &StopHook{Subject: "hooks.stop", OnError: "panic"}},
		{Input: "go", StopHook: &StopHook{Subject: "hooks.stop", Timeout: tools.Duration(time.Hour)}},
	} {
		if _, err := b.p.Start(b.ctx, bad); err == nil {
			t.Errorf("start %+v %+v: no error", bad.StopWhen, bad.StopHook)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// A stop hook is any NATS service: here a plain nats.go subscription. It is asked after
// each step with the step's summary, and its stop ends the run with its reason.
func TestStopHook(t *testing.T) {
	b := setup(t, map[string]string{"main": stopScript})
	var mu sync.Mutex
	var asked []StopSummary
	sub, err := b.nc.Subscribe("hooks.stop", func(m *nats.Msg) {
		var s StopSummary
		if err := json.Unmarshal(m.Data, &s); err != nil {
			_ = m.Respond([]byte(`{"action":"stop","reason":"unreadable summary"}`))
			return
		}
		mu.Lock()
		asked = append(asked, s)
		mu.Unlock()
		answer := `{"action":"continue"}`
		if s.Step == 1 {
			answer = `{"action":"stop","reason":"enough treasure"}`
		}
		_ = m.Respond([]byte(answer))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	run := b.run(t, StartRequest{Input: "go", Tools: []string{"add", "echo"}, StopHook: &StopHook{Subject: "hooks.stop"}})
	if run.Termination != TerminationStopHook || !strings.Contains(run.Detail, "enough treasure") || len(run.Calls) != 3 {
		t.Fatalf("run ended %s (%s) after %d calls", run.Termination, run.Detail, len(run.Calls))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0].Step != 0 || asked[1].Step != 1 {
		t.Fatalf("the hook was asked %+v", asked)
	}
	s := asked[1]
	if s.RunID != run.ID || len(s.Calls) != 2 || s.Calls[0].Tool != "echo" || s.Calls[0].Status != "ok" ||
		s.Usage.Total() == 0 || s.Tokens < s.Usage.Total() || s.Tokens != s.RunUsage.Total() {
		t.Fatalf("summary %+v", s)
	}

	// A hook that does not answer: onError decides.
	silent, err := b.nc.Subscribe("hooks.silent", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	for _, tt := range []struct {
		hook StopHook
		want Termination
	}{
		{StopHook{Subject: "hooks.nobody"}, TerminationCompleted},
		{StopHook{Subject: "hooks.nobody", OnError: "stop"}, TerminationStopHook},
		{StopHook{Subject: "hooks.silent", Timeout: tools.Duration(100 * time.Millisecond), OnError: "stop"}, TerminationStopHook},
	} {
		run := b.run(t, StartRequest{Input: "go", Tools: []string{"add", "echo"}, StopHook: &tt.hook})
		if run.Termination != tt.want {
			t.Errorf("hook %+v: run ended %s (%s), want %s", tt.hook, run.Termination, run.Detail, tt.want)
		}
	}
}

// The compiled stopWhen patterns a planner keeps stay bounded however many distinct
// patterns callers send: ten times the bound of runs, each with a pattern of its own
// matched against its call's output, leave at most maxStopRegexps compiled, and each
// run still stops on its own pattern (a pattern let go is compiled again).
func TestStopRegexpsStayBounded(t *testing.T) {
	stopRegexps.Purge()
	t.Cleanup(stopRegexps.Purge)
	for i := range 10 * maxStopRegexps {
		r := &Run{StopWhen: []StopCondition{{OutputMatches: fmt.Sprintf(`"n":\s*%d\b`, i)}}}
		c := &CallRecord{ID: fmt.Sprintf("call-%d", i), Name: "count", Status: string(events.StatusOK), Output: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
		matchStop(r, c)
		if r.StopMatch == nil || r.StopMatch.CallID != c.ID {
			t.Fatalf("run %d did not stop on its own pattern: %+v", i, r.StopMatch)
		}
		if n := stopRegexps.Len(); n > maxStopRegexps {
			t.Fatalf("after %d distinct patterns %d are kept compiled, more than the bound of %d", i+1, n, maxStopRegexps)
		}
	}
	if n := stopRegexps.Len(); n != maxStopRegexps {
		t.Fatalf("%d patterns kept compiled, want the %d most recent", n, maxStopRegexps)
	}
}
