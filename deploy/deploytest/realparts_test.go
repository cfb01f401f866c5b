package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/builtin"
	tfclient "github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

const realPartsScript = `
steps:
  - calls:
      - {name: calculator, arguments: {expression: "6*7"}}
      - {name: echo, arguments: {value: hi}}
  - calls: [{name: write_file, arguments: {path: out.txt, content: "42"}}]
  - text: wrote 42
`

// The real executor, picker and planner, each logged in as its own user of the
// deployment's auth.conf, carry a whole run — parallel calls, an approval, the picker
// narrowing the tool set — and a call of a tool nobody serves is answered; the server
// refuses none of what they do. Once with one shard (the base's nats.conf), once with
// the sharded overlay's (its mapping, and every part with its number of shards).
func TestRealPartsUnderTheirUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every part against an authenticated server")
	}
	t.Run("one shard", func(t *testing.T) { testRealParts(t, startAuthServer(t), events.Config{}) })
	t.Run("overlays/sharded", func(t *testing.T) {
		testRealParts(t, startTenantServerWith(t, shardedMappings(t)), events.Config{Shards: shippedShards})
	})
}

func testRealParts(t *testing.T, s *authServer, cfg events.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	exec := s.connect(t, "executor")
	sandbox := t.TempDir()
	reg := tools.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Enable: []string{"calculator", "echo", "write_file"}, SandboxRoot: sandbox}); err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(exec.nc, reg, executor.WithStreamConfig(cfg), executor.WithNoSuchToolTimeout(time.Second),
		executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, ex.Run)

	pick := s.connect(t, "picker")
	svc, err := pickerservice.New(pick.nc, pickerservice.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, svc.Run)

	plan := s.connect(t, "planner")
	script, err := provider.ParseScript([]byte(realPartsScript))
	if err != nil {
		t.Fatal(err)
	}
	model, err := provider.NewScripted(script)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "the executor's tools in the catalog", func() bool {
		cat, err := jsutil.OpenCatalog(ctx, plan.js, cfg)
		if err != nil {
			return false
		}
		defs, err := cat.List(ctx)
		return err == nil && len(defs) == 3
	})
	p, err := planner.New(ctx, plan.nc, planner.Config{Models: map[string]provider.Model{"main": model}, Events: cfg,
		Picker: planner.NewPickerClient(plan.nc, 5*time.Second), PickThreshold: 2, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, p.Run)

	// The planner runs only the tools the picker chose, so the input asks for all three.
	run, err := p.Start(ctx, planner.StartRequest{Input: "evaluate an arithmetic expression, return the value unchanged, and write it to a file",
		Tools: []string{"calculator", "echo", "write_file"}})
	if err != nil {
		t.Fatal(err)
	}
	var pending *planner.CallRecord
	natstest.Eventually(t, 30*time.Second, "the write_file approval request", func() bool {
		r, err := p.Get(ctx, run.ID)
		if err != nil {
			return false
		}
		for _, c := range r.Calls {
			if c.Name == "write_file" && c.Status == string(planner.CallAwaitingApproval) {
				pending = c
				return true
			}
		}
		return false
	})
	if err := p.Approve(ctx, pending.ID, events.Identity{}, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "test"}); err != nil {
		t.Fatal(err)
	}
	done, err := p.Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Termination != planner.TerminationCompleted || done.Answer != "wrote 42" || len(done.Calls) != 3 {
		t.Fatalf("run ended %s (%s) with %q and %d calls", done.Termination, done.Detail, done.Answer, len(done.Calls))
	}
	for _, c := range done.Calls {
		if c.Status != "ok" {
			t.Errorf("call %s of %s: %s %s", c.ID, c.Name, c.Status, c.Output)
		}
	}
	if b, err := os.ReadFile(filepath.Join(sandbox, "out.txt")); err != nil || string(b) != "42" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
	servesLists(t, p, run.ID)

	// A client's call of a tool nobody serves is answered by the executor's janitor; the
	// client reads the result through its own consumer, as its permissions intend.
	caller := s.connect(t, "client")
	msg, err := events.NewCall(events.CallOptions{Source: "/client", ID: "ghost1", RunID: "ghostrun"}, events.Call{Tool: "ghost", Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caller.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	subj, err := events.ResultSubject("", "ghostrun", "ghost1")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := caller.js.OrderedConsumer(ctx, cfg.ResultStream(subj), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	if err != nil {
		caller.noViolations()
		t.Fatalf("no answer for a call of a tool nobody serves: %v", err)
	}
	if _, r, err := events.DecodeResult(m); err != nil || r.Status != events.StatusNoSuchTool {
		t.Errorf("call of an unserved tool: %+v %v", r, err)
	}

	// pkg/client, the library for such programs, under the same user: a call and its
	// result, a run's events from its first, and an unsafe call approved through the
	// approval requests it watches.
	lib, err := tfclient.New(caller.nc, tfclient.WithSource("/deploytest"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := lib.Call(ctx, tfclient.Request{Tool: "calculator", Arguments: json.RawMessage(`{"expression":"6*7"}`)}); err != nil || res.Status != events.StatusOK {
		t.Errorf("client library: call: %+v %v", res, err)
	}
	follow, err := lib.FollowRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("client library: follow a run: %v", err)
	}
	if _, _, err := follow.Next(); err != nil {
		t.Errorf("client library: a run's first event: %v", err)
	}
	follow.Stop()
	approvals, err := lib.WatchApprovals(ctx)
	if err != nil {
		t.Fatalf("client library: watch approvals: %v", err)
	}
	unsafe := make(chan error, 1)
	go func() {
		res, err := lib.Call(ctx, tfclient.Request{Tool: "write_file", Arguments: json.RawMessage(`{"path":"lib.txt","content":"ok"}`)})
		if err == nil && res.Status != events.StatusOK {
			err = fmt.Errorf("status %s", res.Status)
		}
		unsafe <- err
	}()
	_, req, err := approvals.Next()
	if err != nil {
		t.Fatalf("client library: the write_file approval request: %v", err)
	}
	approvals.Stop()
	if err := lib.Answer(ctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "deploytest"}); err != nil {
		t.Errorf("client library: approve: %v", err)
	}
	if err := <-unsafe; err != nil {
		t.Errorf("client library: the approved write_file call: %v", err)
	}

	for _, c := range []*client{exec, pick, plan} {
		c.noViolations()
	}
	cleanups := []string{refusedCleanup(events.StreamEvents)}
	for _, stream := range cfg.ResultStreams() {
		cleanups = append(cleanups, refusedCleanup(stream))
	}
	caller.noViolations(cleanups...)
}

// servesLists asks the planner's HTTP API, under the planner's own NATS user, for every
// list the inspector and the CLI show (the fleet page's tools with their queues, runs,
// approvals, dead letters) and the run: each must answer 200 with what the fleet did,
// as it does without permissions.
func servesLists(t *testing.T, p *planner.Planner, runID string) {
	t.Helper()
	api := httptest.NewServer(plannerapi.Handler(p, plannerapi.Auth{}))
	defer api.Close()
	get := func(path string, into any) {
		t.Helper()
		res, err := http.Get(api.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s under the planner's user: %d %s", path, res.StatusCode, body)
			return
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Errorf("GET %s: %v\n%s", path, err, body)
		}
	}
	var tools struct {
		Tools []struct {
			Name      string `json:"name"`
			Executors int    `json:"executors"`
		} `json:"tools"`
	}
	get("/v1/tools", &tools)
	served := map[string]int{}
	for _, tl := range tools.Tools {
		served[tl.Name] = tl.Executors
	}
	if served["calculator"] < 1 || len(served) != 3 {
		t.Errorf("GET /v1/tools: %+v, want the 3 tools with their executor", tools.Tools)
	}
	var runsPage struct{ Runs []struct{ ID string } }
	get("/v1/runs", &runsPage)
	if len(runsPage.Runs) != 1 || runsPage.Runs[0].ID != runID {
		t.Errorf("GET /v1/runs: %+v, want run %s", runsPage.Runs, runID)
	}
	var approvals struct {
		Approvals []struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"approvals"`
	}
	get("/v1/approvals?status=all", &approvals)
	// The arguments come from the approval request on the events stream.
	if len(approvals.Approvals) == 0 || !strings.Contains(string(approvals.Approvals[0].Arguments), "out.txt") {
		t.Errorf("GET /v1/approvals?status=all: %+v, want write_file's with its arguments", approvals.Approvals)
	}
	var dead struct{ DeadLetters []json.RawMessage }
	get("/v1/dead-letters", &dead)
	var one struct{ ID string }
	get("/v1/runs/"+runID, &one)
}

// runPart runs a part until the test ends and checks it stops cleanly.
func runPart(t *testing.T, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "context canceled") {
				t.Errorf("part stopped with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("part did not stop within 20s")
		}
	})
}
