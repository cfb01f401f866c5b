package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// runEvents reads the run events on sub until the call's result is in, and a little
// longer, and returns them by word.
func runEvents(t *testing.T, sub *nats.Subscription) map[string][]events.RunEvent {
	t.Helper()
	out := map[string][]events.RunEvent{}
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			return out
		}
		e, what, r, err := events.DecodeRunEvent(events.CoreMsg(m))
		if err != nil {
			t.Fatalf("run event on %s does not decode: %v", m.Subject, err)
		}
		if e.Time.IsZero() {
			t.Errorf("run event %s without a time", e.ID)
		}
		out[what] = append(out[what], r)
	}
}

// An executor announces each call it starts (tool_started, with the executor and the
// attempt) and publishes the tool's progress (tool_progress) on the call's run, for a
// tenant's run on the tenant's subject; reports are rate-limited (the latest wins) and
// scrubbed of the tool's secrets.
func TestToolStartedAndProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const secret = "pr0gr3ss-s3cr3t"
	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "crawl", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true,
		Secrets: []tools.Secret{{Name: "KEY", File: secretFile(t, secret)}}},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			for i := 1; i <= 50; i++ { // far faster than the rate limit
				tools.ReportProgress(ctx, tools.Progress{Message: fmt.Sprintf("page %d of 50 with %s", i, tools.MustSecret(ctx, "KEY")),
					Fraction: float64(i) / 50, Data: json.RawMessage(fmt.Sprintf(`{"page":%d}`, i))})
			}
			return "crawled", nil
		}))
	b.start(t, reg, executor.WithExecutorID("ex-progress"))
	sub := subscribe(t, b, "toolfleet.event.run.>")

	b.call(t, "crawl", "c1", "run-p", `{}`)
	if r := b.results.one(t, "c1"); r.Status != events.StatusOK {
		t.Fatalf("result %+v", r)
	}
	got := runEvents(t, sub)
	started := got["tool_started"]
	if len(started) != 1 || started[0].CallID != "c1" || started[0].RunID != "run-p" || started[0].Tool != "crawl" ||
		started[0].Executor != "ex-progress" || started[0].Attempt != 1 {
		t.Fatalf("tool_started events %+v", started)
	}
	progress := got["tool_progress"]
	if len(progress) < 1 || len(progress) > 3 {
		t.Fatalf("%d progress events for 50 reports in a burst, want 1 to 3 (rate-limited)", len(progress))
	}
	var last tools.Progress
	must(t, json.Unmarshal(progress[len(progress)-1].Detail, &last))
	if last.Message != "page 50 of 50 with [redacted:KEY]" {
		t.Errorf("last progress %+v: the latest report must win", last)
	}
	if last.Fraction != 1 || string(last.Data) != `{"page":50}` {
		t.Errorf("last progress %+v", last)
	}
	for _, p := range progress {
		if strings.Contains(string(p.Detail), secret) {
			t.Errorf("progress %s shows the tool's secret", p.Detail)
		}
		if p.Seq < 1 || p.Executor != "ex-progress" || p.CallID != "c1" {
			t.Errorf("progress event %+v", p)
		}
	}

	// A tenant's run: the events are on the tenant's subjects.
	tenantSub := subscribe(t, b, "toolfleet.event.run.r.*.acme")
	b.callAs(t, events.Identity{Tenant: "acme", Role: "user"}, "crawl", "c2")
	b.results.one(t, "c2")
	got = runEvents(t, tenantSub)
	if s := got["tool_started"]; len(s) != 1 || s[0].Tenant != "acme" || s[0].CallID != "c2" || len(got["tool_progress"]) == 0 {
		t.Errorf("a tenant's run events: %+v", got)
	}
}

// tool_started is published for a call still running after the executor's startedAfter
// (its time is the start), or at once with WithStartedAfter(0); a quicker call is not
// announced by default.
func TestToolStartedAfter(t *testing.T) {
	t.Parallel()
	for _, after := range []time.Duration{0, executor.DefaultStartedAfter} {
		b := setup(t)
		reg := echoRegistry(t)
		must(t, reg.AddFunc(tools.Definition{Name: "nap", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
			func(ctx context.Context, _ json.RawMessage) (any, error) {
				time.Sleep(10 * after)
				return "rested", nil
			}))
		b.start(t, reg, executor.WithStartedAfter(after))
		sub := subscribe(t, b, "toolfleet.event.run.>")
		b.call(t, "echo", "quick", "q", `{"text":"x"}`)
		b.call(t, "nap", "long", "l", `{}`)
		res := b.results.wait(t, 15*time.Second, "quick", "long")
		got := runEvents(t, sub)
		byCall := map[string]bool{}
		for _, r := range got["tool_started"] {
			byCall[r.CallID] = true
		}
		if !byCall["long"] {
			t.Errorf("after %s: no tool_started for a call that ran %s", after, 10*after)
		}
		if byCall["quick"] != (after == 0) {
			t.Errorf("after %s: tool_started for a quick call: %v", after, byCall["quick"])
		}
		if res["quick"].Status != events.StatusOK || res["long"].Status != events.StatusOK {
			t.Errorf("results %+v", res)
		}
	}
}
