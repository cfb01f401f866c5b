package planner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wI2L/jsondiff"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Diff: compare two runs step by step ([Planner.Diff], GET /v1/runs/{a}/diff/{b}). The
// steps are aligned by index; when one run is a fork of the other, from the fork point
// (the fork's step 0 with the original's step k, the steps before k counted as shared:
// the fork reused them). Per aligned step it says whether the model's text changed,
// pairs the calls of each side by tool and order (the n-th call of a tool with the n-th
// call of that tool), and gives each pair's argument and result differences as RFC 6902
// JSON Patch operations (from a's to b's), its status and error changes, and the step's
// duration, token and cost deltas (b - a); totals sum them. The patches are computed
// by github.com/wI2L/jsondiff: a maintained RFC 6902 differ over raw JSON, whose
// operations clients can apply or show as they are.

// RunDiff is the comparison of runs A and B.
type RunDiff struct {
	A DiffRun `json:"a"`
	B DiffRun `json:"b"`
	// Shared counts the steps both runs have as one: the original's steps before the
	// fork point, which the fork reused (0 for runs that are not fork and origin).
	Shared int `json:"shared"`
	// Steps are the aligned steps, in order.
	Steps  []StepDiff `json:"steps"`
	Totals DiffTotals `json:"totals"`
}

// DiffRun is one side of a diff: the run, and the step of it aligned with the other's
// first (its fork point, for an original compared with its fork).
type DiffRun struct {
	ID          string            `json:"id"`
	Model       string            `json:"model"`
	Status      Status            `json:"status"`
	Termination Termination       `json:"termination,omitempty"`
	Answer      string            `json:"answer,omitempty"`
	Steps       int               `json:"steps"`
	From        int               `json:"from"`
	ForkedFrom  *runrec.ForkPoint `json:"forkedFrom,omitempty"`
}

// StepDiff compares step A of run a with step B of run b; a side without such a step
// has none (nil).
type StepDiff struct {
	A *int `json:"a"`
	B *int `json:"b"`
	// Changed: anything below differs (text, calls, statuses, errors).
	Changed     bool       `json:"changed"`
	TextChanged bool       `json:"textChanged"`
	TextA       string     `json:"textA,omitempty"`
	TextB       string     `json:"textB,omitempty"`
	Calls       []CallDiff `json:"calls"`
	DurationMS  Delta      `json:"durationMs"`
	Tokens      Delta      `json:"tokens"`
	Cost        CostDelta  `json:"cost"`
}

// CallDiff pairs the Index-th call of Tool in a step of each run (a side that has no
// such call has none).
type CallDiff struct {
	Tool  string    `json:"tool"`
	Index int       `json:"index"`
	A     *CallSide `json:"a"`
	B     *CallSide `json:"b"`
	// Arguments and Result are what turns a's into b's (RFC 6902); empty: the same.
	Arguments     jsondiff.Patch `json:"arguments"`
	Result        jsondiff.Patch `json:"result"`
	StatusChanged bool           `json:"statusChanged"`
	ErrorChanged  bool           `json:"errorChanged"`
	DurationMS    Delta          `json:"durationMs"`
}

// CallSide is a call of one side of a CallDiff.
type CallSide struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Error      string          `json:"error,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	DurationMS int64           `json:"durationMs"`
}

// Delta is a quantity of each side and b - a.
type Delta struct {
	A     int64 `json:"a"`
	B     int64 `json:"b"`
	Delta int64 `json:"delta"`
}

// CostDelta is a cost of each side and b - a.
type CostDelta struct {
	A     float64 `json:"a"`
	B     float64 `json:"b"`
	Delta float64 `json:"delta"`
}

// DiffTotals sums a diff: the steps and calls compared and changed, and the deltas of
// the aligned steps.
type DiffTotals struct {
	Steps        int       `json:"steps"`
	ChangedSteps int       `json:"changedSteps"`
	Calls        int       `json:"calls"`
	ChangedCalls int       `json:"changedCalls"`
	DurationMS   Delta     `json:"durationMs"`
	Tokens       Delta     `json:"tokens"`
	Cost         CostDelta `json:"cost"`
}

// Empty reports whether the diff found no difference.
func (d *RunDiff) Empty() bool { return d.Totals.ChangedSteps == 0 }

func newDelta(a, b int64) Delta { return Delta{A: a, B: b, Delta: b - a} }

func newCostDelta(a, b float64) CostDelta { return CostDelta{A: a, B: b, Delta: b - a} }

func (d *Delta) add(o Delta) { d.A, d.B, d.Delta = d.A+o.A, d.B+o.B, d.Delta+o.Delta }

func (d *CostDelta) add(o CostDelta) { d.A, d.B, d.Delta = d.A+o.A, d.B+o.B, d.Delta+o.Delta }

// Diff compares runs a and b for caller: both must be runs it may see (404 otherwise).
func (p *Planner) Diff(ctx context.Context, a, b string, caller events.Identity) (*RunDiff, error) {
	ra, err := p.GetFor(ctx, a, caller)
	if err != nil {
		return nil, err
	}
	rb, err := p.GetFor(ctx, b, caller)
	if err != nil {
		return nil, err
	}
	sa, err := p.diffSteps(ctx, ra)
	if err != nil {
		return nil, err
	}
	sb, err := p.diffSteps(ctx, rb)
	if err != nil {
		return nil, err
	}
	d := &RunDiff{A: diffRun(ra), B: diffRun(rb), Steps: []StepDiff{}}
	switch {
	case rb.ForkedFrom != nil && rb.ForkedFrom.Run == ra.ID:
		d.A.From, d.Shared = rb.ForkedFrom.Step, rb.ForkedFrom.Step
	case ra.ForkedFrom != nil && ra.ForkedFrom.Run == rb.ID:
		d.B.From, d.Shared = ra.ForkedFrom.Step, ra.ForkedFrom.Step
	case ra.ForkedFrom != nil && rb.ForkedFrom != nil && ra.ForkedFrom.Run == rb.ForkedFrom.Run:
		// Two forks of one run: each from its own point, both its step 0 on.
		d.Shared = min(ra.ForkedFrom.Step, rb.ForkedFrom.Step)
	}
	for i := 0; d.A.From+i < len(sa) || d.B.From+i < len(sb); i++ {
		var x, y *diffStep
		if n := d.A.From + i; n < len(sa) {
			x = &sa[n]
		}
		if n := d.B.From + i; n < len(sb) {
			y = &sb[n]
		}
		sd, err := compareSteps(x, y)
		if err != nil {
			return nil, err
		}
		d.Steps = append(d.Steps, sd)
		d.Totals.Steps++
		if sd.Changed {
			d.Totals.ChangedSteps++
		}
		for _, c := range sd.Calls {
			d.Totals.Calls++
			if c.changed() {
				d.Totals.ChangedCalls++
			}
		}
		d.Totals.DurationMS.add(sd.DurationMS)
		d.Totals.Tokens.add(sd.Tokens)
		d.Totals.Cost.add(sd.Cost)
	}
	return d, nil
}

func diffRun(r *Run) DiffRun {
	return DiffRun{ID: r.ID, Model: r.Model, Status: r.Status, Termination: r.Termination, Answer: r.Answer,
		Steps: r.StepsTaken(), ForkedFrom: r.ForkedFrom}
}

// diffStep is what a diff compares of one step of a run.
type diffStep struct {
	step       int
	text       string
	calls      []*CallRecord
	durationMS int64
	tokens     int64
	cost       float64
}

// diffSteps returns the steps the model answered of run r (assembled): each one's
// text, calls, duration (from when its model was asked to when the next one was, or the
// run ended), tokens and cost (what the run's cost grew by, its calls' prices included).
func (p *Planner) diffSteps(ctx context.Context, r *Run) ([]diffStep, error) {
	recs, err := p.rlog.Steps(ctx, r.ID, 0, r.Recorded, true)
	if err != nil {
		return nil, err
	}
	out := make([]diffStep, 0, r.StepsTaken())
	prevCost := 0.0
	for _, rec := range recs {
		s := diffStep{step: rec.Step, text: rec.Message.Text}
		if st := rec.State; st != nil {
			s.tokens = int64(st.StepUsage.Total())
			s.cost, prevCost = st.Cost-prevCost, st.Cost
		}
		out = append(out, s)
	}
	if r.AnswerUnrecorded() {
		out = append(out, diffStep{step: r.Step, text: r.Answer, tokens: int64(r.StepUsage.Total())})
	}
	if n := len(out); n > 0 {
		out[n-1].cost += r.Cost - prevCost // what the last step's calls were charged
	}
	for i := range out {
		s := &out[i]
		for _, c := range r.Calls {
			if c.Step == s.step {
				s.calls = append(s.calls, c)
			}
		}
		at := r.OfferedAt(s.step)
		if at == nil || at.AskedAt.IsZero() {
			continue
		}
		switch next := r.OfferedAt(s.step + 1); {
		case next != nil && !next.AskedAt.IsZero():
			s.durationMS = next.AskedAt.Sub(at.AskedAt).Milliseconds()
		case r.FinishedAt != nil:
			s.durationMS = r.FinishedAt.Sub(at.AskedAt).Milliseconds()
		}
	}
	return out, nil
}

// compareSteps compares step x of run a with step y of run b (nil: none).
func compareSteps(x, y *diffStep) (StepDiff, error) {
	var sd StepDiff
	var ta, tb string
	var ca, cb []*CallRecord
	var da, db, ka, kb int64
	var costA, costB float64
	if x != nil {
		sd.A, ta, ca, da, ka, costA = &x.step, x.text, x.calls, x.durationMS, x.tokens, x.cost
	}
	if y != nil {
		sd.B, tb, cb, db, kb, costB = &y.step, y.text, y.calls, y.durationMS, y.tokens, y.cost
	}
	sd.DurationMS, sd.Tokens, sd.Cost = newDelta(da, db), newDelta(ka, kb), newCostDelta(costA, costB)
	sd.TextChanged = ta != tb || x == nil || y == nil
	if sd.TextChanged {
		sd.TextA, sd.TextB = ta, tb
	}
	calls, err := pairCalls(ca, cb)
	if err != nil {
		return sd, err
	}
	sd.Calls = calls
	sd.Changed = sd.TextChanged
	for _, c := range calls {
		sd.Changed = sd.Changed || c.changed()
	}
	return sd, nil
}

// pairCalls pairs the calls of a step of each run by tool and order, in the order of
// a's calls, then b's unpaired ones.
func pairCalls(ca, cb []*CallRecord) ([]CallDiff, error) {
	out := []CallDiff{}
	used := make([]bool, len(cb))
	nth := func(calls []*CallRecord, i int) int { // how many calls of calls[i]'s tool come before it
		n := 0
		for _, c := range calls[:i] {
			if c.Name == calls[i].Name {
				n++
			}
		}
		return n
	}
	for i, a := range ca {
		idx := nth(ca, i)
		var b *CallRecord
		for j, c := range cb {
			if !used[j] && c.Name == a.Name && nth(cb, j) == idx {
				b, used[j] = c, true
				break
			}
		}
		cd, err := compareCalls(a.Name, idx, a, b)
		if err != nil {
			return nil, err
		}
		out = append(out, cd)
	}
	for j, b := range cb {
		if !used[j] {
			cd, err := compareCalls(b.Name, nth(cb, j), nil, b)
			if err != nil {
				return nil, err
			}
			out = append(out, cd)
		}
	}
	return out, nil
}

// compareCalls compares call a with call b (nil: none) of tool.
func compareCalls(tool string, index int, a, b *CallRecord) (CallDiff, error) {
	cd := CallDiff{Tool: tool, Index: index, A: callSide(a), B: callSide(b), Arguments: jsondiff.Patch{}, Result: jsondiff.Patch{}}
	var argsA, argsB, outA, outB json.RawMessage
	var da, db int64
	if a != nil {
		argsA, outA, da = a.Arguments, a.Output, a.DurationMS
	}
	if b != nil {
		argsB, outB, db = b.Arguments, b.Output, b.DurationMS
	}
	cd.DurationMS = newDelta(da, db)
	var err error
	if cd.Arguments, err = patch(argsA, argsB); err != nil {
		return cd, fmt.Errorf("arguments of %s: %w", tool, err)
	}
	if cd.Result, err = patch(outA, outB); err != nil {
		return cd, fmt.Errorf("results of %s: %w", tool, err)
	}
	if cd.A != nil && cd.B != nil {
		cd.StatusChanged, cd.ErrorChanged = cd.A.Status != cd.B.Status, cd.A.Error != cd.B.Error
	}
	return cd, nil
}

func (c *CallDiff) changed() bool {
	return c.A == nil || c.B == nil || len(c.Arguments) > 0 || len(c.Result) > 0 || c.StatusChanged || c.ErrorChanged
}

func callSide(c *CallRecord) *CallSide {
	if c == nil {
		return nil
	}
	s := &CallSide{ID: c.ID, Status: c.Status, Arguments: c.Arguments, Output: c.Output, DurationMS: c.DurationMS}
	if c.Error != nil {
		s.Error = string(c.Error.Code) + ": " + c.Error.Message
	}
	return s
}

// patch is the RFC 6902 patch from a to b (absent JSON is null).
func patch(a, b json.RawMessage) (jsondiff.Patch, error) {
	if len(a) == 0 {
		a = json.RawMessage("null")
	}
	if len(b) == 0 {
		b = json.RawMessage("null")
	}
	p, err := jsondiff.CompareJSON(a, b)
	if p == nil {
		p = jsondiff.Patch{}
	}
	return p, err
}
