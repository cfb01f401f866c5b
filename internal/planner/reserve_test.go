package planner

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
)

// fanOut answers as a model asked to fan out to width sub-agents would: the root
// starts width run_agent calls at once, then answers; each sub-agent calls add, then
// answers at length (childOutput tokens, cut by max_tokens as a provider cuts it).
func fanOut(width, childOutput int) func(plannertest.OpenAIRequest) plannertest.OpenAIAnswer {
	return func(req plannertest.OpenAIRequest) plannertest.OpenAIAnswer {
		first, answered := "", 0
		for _, m := range req.Messages {
			if m.Role == "user" && first == "" {
				first = m.Text()
			}
			if m.Role == "assistant" {
				answered++
			}
		}
		switch {
		case first == "fan out" && answered == 0:
			var calls []provider.ToolCall
			for i := range width {
				calls = append(calls, provider.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: AgentToolName,
					Arguments: json.RawMessage(fmt.Sprintf(`{"task":"part %d","tools":["add"]}`, i))})
			}
			return plannertest.OpenAIAnswer{Calls: calls, Usage: provider.Usage{InputTokens: 200, OutputTokens: 15 * width}}
		case first == "fan out":
			return plannertest.OpenAIAnswer{Text: "root done", Usage: provider.Usage{InputTokens: 300, OutputTokens: 20}}
		case answered == 0:
			return plannertest.OpenAIAnswer{Calls: []provider.ToolCall{{ID: "call_add", Name: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`)}},
				Usage: provider.Usage{InputTokens: 150, OutputTokens: 20}}
		}
		return plannertest.OpenAIAnswer{Text: first + " done: " + strings.Repeat("word ", 20),
			Usage: provider.Usage{InputTokens: 200, OutputTokens: childOutput}}
	}
}

// fanOutPlanners serves runs with replicas planners whose model "main" is fixture,
// priced at 10 per million tokens, in and out.
func fanOutPlanners(t *testing.T, b *testBundle, fixture *plannertest.OpenAIFixture, replicas int) {
	t.Helper()
	cfg := Config{Models: map[string]provider.Model{"main": fixture.Model(t)}, DefaultModel: "main",
		Prices: PriceTable{Models: map[string]ModelPrice{"main": {InputPerMTok: 10, OutputPerMTok: 10}}}}
	b.swapPlanner(t, cfg)
	for range replicas - 1 {
		cfg.Events, cfg.Log = b.cfg, zerolog.Nop()
		p, err := New(b.ctx, b.srv.Connect(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		serve(t, p.Run)
	}
}

// A tree's budget holds however wide it fans out. The root starts 6, then 20, sub-agents
// at once, each of which would answer with 2,000 tokens, on one planner and on two
// replicas sharing the runs: the tree's cost stays within costBudget (and its tokens
// within tokenBudget), because each answer's most is reserved from the root before the
// model is asked and its max_tokens capped to fit (the fixture model got a cap on every
// request, and some below what it would have said); the sub-agents that cannot afford
// an answer end with the budget's termination, and so does the root, whose failed calls
// they are not. Before, each running sub-agent could pay one answer past the budget: 6
// spent 0.136 of 0.1, 20 spent 0.16; and the root of 20 ended error_threshold, its
// sub-agents' budget ends counted as failed tools.
func TestBudgetHoldsHoweverWideTheTreeFansOut(t *testing.T) {
	const childOutput = 2000
	for _, tt := range []struct {
		name     string
		width    int
		replicas int
		limits   Limits
	}{
		{"6 wide, cost", 6, 1, Limits{MaxDepth: 3, CostBudget: 0.1, MaxSteps: 100}},
		{"20 wide, cost", 20, 1, Limits{MaxDepth: 3, CostBudget: 0.1, MaxSteps: 100}},
		{"20 wide, cost, 2 replicas", 20, 2, Limits{MaxDepth: 3, CostBudget: 0.1, MaxSteps: 100}},
		{"20 wide, tokens, 2 replicas", 20, 2, Limits{MaxDepth: 3, TokenBudget: 10000, MaxSteps: 100}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, nil)
			fixture := plannertest.NewOpenAIFixture(t, fanOut(tt.width, childOutput))
			fanOutPlanners(t, b, fixture, tt.replicas)
			root := b.run(t, StartRequest{Input: "fan out", Tools: []string{"add", "run_agent"}, Limits: tt.limits})
			runs := b.tree(t, root)
			if len(runs) != tt.width+1 {
				t.Fatalf("%d runs in the tree, want the root and %d sub-agents: %v", len(runs), tt.width, terminations(runs))
			}
			total := sumOwn(runs)
			limit, want := tt.limits.CostBudget, TerminationCostBudget
			if limit > 0 && total.Cost > limit+budget.Epsilon {
				t.Fatalf("the tree spent %.6g of its budget of %g (%v)", total.Cost, limit, terminations(runs))
			}
			if b := tt.limits.TokenBudget; b > 0 {
				want = TerminationTokenBudget
				if total.Usage.Total() > b {
					t.Fatalf("the tree used %d tokens of its budget of %d (%v)", total.Usage.Total(), b, terminations(runs))
				}
			}
			if !near(root.Tree().Cost, total.Cost) || root.Tree().Usage != total.Usage {
				t.Fatalf("the root counts %+v, its tree's runs add up to %+v", root.Tree(), total)
			}
			// The root ends for the budget too, not for its failed calls: a sub-agent that
			// ended because the tree's budget is spent is no tool error.
			if root.Termination != want || root.Errors != 0 {
				t.Fatalf("the root ended %s (%s) with %d failed calls, want %s and none", root.Termination, root.Detail, root.Errors, want)
			}
			// Every sub-agent answered or ended by the budget, with why; some could not
			// afford an answer.
			var answered, stopped int
			for _, r := range runs[1:] {
				switch r.Termination {
				case TerminationCompleted:
					answered++
				case want:
					stopped++
					if !strings.Contains(r.Detail, "budget") {
						t.Fatalf("a sub-agent ended %s with %q", r.Termination, r.Detail)
					}
				default:
					t.Fatalf("a sub-agent ended %s (%s)", r.Termination, r.Detail)
				}
			}
			if answered == 0 || stopped == 0 {
				t.Fatalf("%d sub-agents answered and %d ended %s: %v", answered, stopped, want, terminations(runs))
			}
			// The model got a cap on every request, and some caps cut an answer short.
			reqs := fixture.Requests()
			cut := 0
			for _, r := range reqs {
				if r.MaxTokens < budget.MinAnswerTokens || r.MaxTokens > provider.DefaultMaxTokens {
					t.Fatalf("a request's max_tokens is %d, want between %d and %d", r.MaxTokens, budget.MinAnswerTokens, provider.DefaultMaxTokens)
				}
				if r.MaxTokens < childOutput {
					cut++
				}
			}
			t.Logf("spent %.6g, %d tokens; %d answered, %d stopped; %d requests, %d capped below %d; root %s (%s)", total.Cost, total.Usage.Total(), answered, stopped, len(reqs), cut, childOutput, root.Termination, root.Detail)
			if cut == 0 {
				t.Fatalf("no request of %d was capped below the %d tokens a sub-agent answers with", len(reqs), childOutput)
			}
		})
	}
}

// A run alone holds its budget too: its answer's max_tokens is capped to what the run
// has left, so an answer that would cost more is cut where the budget ends (the fixture
// cuts it, as a provider does) instead of taking the run over; and a run whose budget
// cannot pay for even a short answer ends cost_budget before its model is asked.
// Before, the run paid its last answer whole: 0.0252 of a budget of 0.02.
func TestBudgetCapsARunsOwnAnswer(t *testing.T) {
	b := setup(t, nil)
	fixture := plannertest.NewOpenAIFixture(t, func(req plannertest.OpenAIRequest) plannertest.OpenAIAnswer {
		if len(req.Messages) == 1 {
			return plannertest.OpenAIAnswer{Calls: []provider.ToolCall{{ID: "call_add", Name: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`)}},
				Usage: provider.Usage{InputTokens: 200, OutputTokens: 20}}
		}
		return plannertest.OpenAIAnswer{Text: "a long answer", Usage: provider.Usage{InputTokens: 300, OutputTokens: 2000}}
	})
	fanOutPlanners(t, b, fixture, 1)

	run := b.run(t, StartRequest{Input: "add", Tools: []string{"add"}, Limits: Limits{CostBudget: 0.02}})
	if run.Termination != TerminationCompleted || run.Cost > 0.02+budget.Epsilon {
		t.Fatalf("the run ended %s (%s) at a cost of %.6g, want completed within 0.02", run.Termination, run.Detail, run.Cost)
	}
	reqs := fixture.Requests()
	if len(reqs) != 2 || reqs[1].MaxTokens < budget.MinAnswerTokens || reqs[1].MaxTokens >= 2000 || run.Usage.OutputTokens != 20+reqs[1].MaxTokens {
		t.Fatalf("the model was asked %d times, its last answer capped at %d tokens (%+v), want capped below its 2000", len(reqs), reqs[len(reqs)-1].MaxTokens, run.Usage)
	}

	run = b.run(t, StartRequest{Input: "add", Tools: []string{"add"}, Limits: Limits{CostBudget: 0.005}})
	if run.Termination != TerminationCostBudget || run.Cost != 0 || !strings.Contains(run.Detail, "not enough for an answer of 16 tokens") {
		t.Fatalf("a run that cannot pay for an answer ended %s (%s) at %.6g", run.Termination, run.Detail, run.Cost)
	}
	if n := len(fixture.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times in all, want 2: not by the run that could not pay", n)
	}
}

// A reservation whose planner died holds what it reserved until it expires, and no
// longer: a sub-agent that finds the root's budget held by one waits (it neither ends
// nor goes over), and asks its model once the reservation has expired.
func TestReservationOfADeadPlannerExpires(t *testing.T) {
	b := setup(t, nil)
	asked := make(chan struct{})
	release := make(chan struct{})
	var childAsked time.Time
	var mu sync.Mutex
	fixture := plannertest.NewOpenAIFixture(t, func(req plannertest.OpenAIRequest) plannertest.OpenAIAnswer {
		switch first := req.Messages[0].Text(); {
		case first == "delegate" && len(req.Messages) == 1:
			close(asked)
			<-release
			return plannertest.OpenAIAnswer{Calls: []provider.ToolCall{{ID: "call_0", Name: AgentToolName, Arguments: json.RawMessage(`{"task":"part 0","tools":["add"]}`)}},
				Usage: provider.Usage{InputTokens: 100, OutputTokens: 20}}
		case first == "delegate":
			return plannertest.OpenAIAnswer{Text: "root done", Usage: provider.Usage{InputTokens: 100, OutputTokens: 20}}
		}
		mu.Lock()
		childAsked = time.Now()
		mu.Unlock()
		return plannertest.OpenAIAnswer{Text: "child done", Usage: provider.Usage{InputTokens: 100, OutputTokens: 20}}
	})
	fanOutPlanners(t, b, fixture, 1)
	run, err := b.p.Start(b.ctx, StartRequest{Input: "delegate", Tools: []string{"add", "run_agent"}, Limits: Limits{CostBudget: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	// While the root's model answers, a planner that died holds all of its budget for an
	// answer of a run of its tree (as a reservation it made and never settled).
	<-asked
	until := time.Now().Add(500 * time.Millisecond)
	if _, err := b.p.runs.Update(b.ctx, run.ID, func(r *Run) (bool, error) {
		r.Reserved = append(r.Reserved, runrec.Reservation{Run: "cdead", Step: 0, Cost: 0.1, Until: until})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	root := b.wait(t, run.ID)
	runs := b.tree(t, root)
	if len(runs) != 2 || runs[1].Termination != TerminationCompleted || root.Termination != TerminationCompleted {
		t.Fatalf("the tree ended %v (%s)", terminations(runs), runs[len(runs)-1].Detail)
	}
	mu.Lock()
	defer mu.Unlock()
	if childAsked.Before(until) {
		t.Fatalf("the sub-agent asked its model at %s, before the dead planner's reservation expired at %s", childAsked, until)
	}
	if root.Cost > 0.1 || len(root.Reserved) != 0 {
		t.Fatalf("the root spent %.6g and still holds %+v", root.Cost, root.Reserved)
	}
}
