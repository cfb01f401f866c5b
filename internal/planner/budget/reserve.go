package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/planner/runstore"
	"github.com/toolfleet/toolfleet/internal/provider"
)

// Reservations: budgets that hold however wide a tree of runs fans out.
//
// Before a run with a budget (Limits.CostBudget or TokenBudget) asks its model, the
// planner works out the most the answer can cost: its input at most
// provider.InputTokensBound of the request (one token per byte, plus a chat
// template's), its output at most the request's MaxTokens, which the planner sets. The
// run's own budgets must pay for it; nothing else spends them while it asks (its nested
// runs have ended). A nested run's answer is also held, by compare-and-set, from the
// budgets of every run it is nested in, its parent first and the root last: a
// [runrec.Reservation] in that run's Reserved. What a run's tree has left is its budget less
// its tree's totals and less what it holds for answers under way, so two runs of a tree
// asking at once, on any replicas, cannot both take the last of it. MaxTokens is the
// most output that fits what each of those runs has left, and at most the model's
// ModelPrice.MaxOutputTokens.
//
// A reservation is settled when its answer is charged: the charge that carries the
// answer's usage up the tree ([Tree.RollUp]) removes it in the same compare-and-set at each
// run, so no run counts the answer twice or not at all. It is keyed by run and step: a
// step taken again (its replica died while the model answered) replaces it, and the
// answer another replica recorded settles it. A reservation of a planner that died is
// released when another replica takes the step over (it replaces it, then settles it),
// when the run ends (its last charge settles all of its), and at the latest at Until:
// the model call's deadline (the run's deadline or Tree.ModelTimeout, the sooner)
// plus Tree.Lease. A run holds at most one reservation at each run above it.
//
// A step whose budgets cannot pay for the shortest answer (MinAnswerTokens of output
// after its input at its bound) ends before its model is asked, with cost_budget or
// token_budget. When what it lacks is held for other runs' answers under way, it waits
// for one of them to be settled or to expire (a watch of that run's value), keeping its
// step, until its run's deadline.
//
// The guarantee rests on the provider honouring max_tokens and counting the input
// within its bound. A model that does not (the scripted model ignores max_tokens and
// reports the usage its script says) is charged what it reports: its tree can go over
// by the difference.
//
// What it costs: a run without a budget pays nothing (no bound, no write, no
// max_tokens: BenchmarkLoopStep's loop/raw new/old 0.97-1.22, median 1.01, i.e.
// noise); a root run with one sums its request's lengths; a nested run with one makes
// one compare-and-set on each run above it per step instead of reading each
// ([Tree.AncestorsStop]), and its settlement rides on the charge it made already.

// MinAnswerTokens is the shortest answer a step with a budget asks for: a step whose
// budgets cannot pay for this many output tokens, after its input at its bound, ends.
const MinAnswerTokens = 16

// Budgeted reports whether r has a budget its answers are reserved from.
func Budgeted(r *runrec.Run) bool { return r.Limits.CostBudget > 0 || r.Limits.TokenBudget > 0 }

// Held sums what r holds, at now, for answers under way other than run's.
func Held(r *runrec.Run, run string, now time.Time) (cost float64, tokens int) {
	for _, h := range r.Reserved {
		if h.Run != run && now.Before(h.Until) {
			cost += h.Cost
			tokens += h.Tokens
		}
	}
	return cost, tokens
}

// Release removes the reservations of run's steps up to through, and those expired at
// now; it reports whether it removed any.
func Release(r *runrec.Run, run string, through int, now time.Time) bool {
	n := len(r.Reserved)
	r.Reserved = slices.DeleteFunc(r.Reserved, func(h runrec.Reservation) bool {
		return h.Run == run && h.Step <= through || !now.Before(h.Until)
	})
	if len(r.Reserved) == 0 {
		r.Reserved = nil
	}
	return len(r.Reserved) != n
}

// Reserve holds h, in place of any reservation of the same run.
func Reserve(r *runrec.Run, h runrec.Reservation) {
	r.Reserved = slices.DeleteFunc(r.Reserved, func(o runrec.Reservation) bool { return o.Run == h.Run })
	r.Reserved = append(r.Reserved, h)
}

// AnsweredThrough is the last step of r whose model answer r's totals include.
func AnsweredThrough(r *runrec.Run) int {
	switch {
	case r.Status == runrec.StatusDone:
		return math.MaxInt
	case len(r.StepCalls()) > 0:
		return r.Step
	}
	return r.Step - 1
}

// Stop: a step cannot be paid for; its run ends with T before its model is asked.
type Stop struct {
	T      runrec.Termination
	Detail string
}

// Error is Detail.
func (e *Stop) Error() string { return e.Detail }

// ErrNotReserved: an answer could not be reserved (NATS failed); the model was not asked,
// and the step is tried again.
var ErrNotReserved = errors.New("the answer's reservation failed")

// answerFit is how many output tokens an answer of model to in input tokens may have
// within what x has left, holding back what x holds for answers other than run's
// (held), or without holding it back (free): the termination and why when fit is
// below MinAnswerTokens. math.MaxInt when x has no budget that bounds it.
func (tr *Tree) answerFit(x *runrec.Run, model, run string, in int, now time.Time) (fit, free int, t runrec.Termination, why string) {
	heldCost, heldTokens := Held(x, run, now)
	fit, free = math.MaxInt, math.MaxInt
	if b := x.Limits.TokenBudget; b > 0 {
		left := b - x.TreeTokens()
		fit, free = left-heldTokens-in, left-in
		if fit < MinAnswerTokens {
			t, why = runrec.TerminationTokenBudget, fmt.Sprintf(
				"has %d tokens left of its budget of %d (%d more held for answers under way): not enough for an answer of %d tokens to its input of at most %d",
				max(left-heldTokens, 0), b, heldTokens, MinAnswerTokens, in)
		}
	}
	price, priced := tr.Prices.Models[model]
	if b := x.Limits.CostBudget; b > 0 && priced {
		left := b - x.TreeCost()
		out := func(left float64) int {
			rest := left - float64(in)*price.InputPerMTok/1e6
			switch {
			case rest < -Epsilon:
				return -1
			case price.OutputPerMTok == 0:
				return math.MaxInt
			}
			return int(min(math.Floor(max(rest, 0)*1e6/price.OutputPerMTok), math.MaxInt32))
		}
		f, fr := out(left-heldCost), out(left)
		if f < fit && f < MinAnswerTokens {
			t, why = runrec.TerminationCostBudget, fmt.Sprintf(
				"has %.6g left of its cost budget of %.6g (%.6g more held for answers under way): not enough for an answer of %d tokens to its input of at most %d tokens (%.6g)",
				max(left-heldCost, 0), b, heldCost, MinAnswerTokens, in, tr.Prices.ModelCost(model, provider.Usage{InputTokens: in, OutputTokens: MinAnswerTokens}))
		}
		fit, free = min(fit, f), min(free, fr)
	}
	return fit, free, t, why
}

// Answer caps req's MaxTokens to what run's budgets can pay for, and holds the
// answer from the budgets of the runs it is nested in (see above). A *Stop says
// the step cannot be paid for. The step's claim is held meanwhile by whoever took it
// (the planner renews it while the step is taken, however long this waits).
func (tr *Tree) Answer(ctx context.Context, run *runrec.Run, req *provider.Request) error {
	in := provider.InputTokensBound(*req)
	out, _, t, why := tr.answerFit(run, run.Model, run.ID, in, tr.Now())
	if out < MinAnswerTokens {
		if run.HasNested() {
			why = "with its nested runs " + why
		}
		return &Stop{T: t, Detail: "the run " + why}
	}
	out = min(out, tr.Prices.MaxOutput(run.Model))
	if run.ParentID != "" {
		var err error
		if out, err = tr.reserveAnswer(ctx, run, in, out); err != nil {
			var unpaid *Stop
			if errors.As(err, &unpaid) {
				return err
			}
			return fmt.Errorf("%w: %w", ErrNotReserved, err)
		}
	}
	req.MaxTokens = out
	return nil
}

// heldAbove: what a run above lacks for an answer is held for others' answers under way.
type heldAbove struct {
	id    string
	until time.Time // when the first of those reservations expires
}

// reserveAnswer holds an answer of run to in input tokens and at most out output tokens
// from each run it is nested in, and returns the output tokens that fit them all; it
// waits while what one of them lacks is held for others.
func (tr *Tree) reserveAnswer(ctx context.Context, run *runrec.Run, in, out int) (int, error) {
	var w jetstream.KeyWatcher
	watched := ""
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	for {
		fit, held, err := tr.reserveUp(ctx, run, in, out)
		if err != nil || held == nil {
			return fit, err
		}
		if watched != held.id {
			if w != nil {
				_ = w.Stop()
			}
			if w, err = jsutil.Watch(ctx, tr.Runs.KV(), held.id, jetstream.UpdatesOnly()); err != nil {
				return 0, fmt.Errorf("watch run %s for its budget: %w", held.id, err)
			}
			watched = held.id
			continue // a settlement before the watch began is seen by trying again
		}
		timer := time.NewTimer(max(sooner(held.until, run.Deadline).Sub(tr.Now()), time.Millisecond))
		select {
		case _, ok := <-w.Updates():
			if !ok {
				watched = "" // the watch ended: a new one
				w = nil
			}
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return 0, ctx.Err()
		}
		timer.Stop()
		if !run.Deadline.IsZero() && !tr.Now().Before(run.Deadline) {
			return 0, &Stop{T: runrec.TerminationTimeout, Detail: fmt.Sprintf(
				"the run's time limit of %s ran out while what run %s had left was held for other answers under way", run.Limits.Timeout.D(), held.id)}
		}
	}
}

// reserveUp makes one try of reserveAnswer: up from run's parent, each run it is nested
// in holds the answer (the output that fits all so far), or says what stops it (a
// *Stop), or that what it lacks is held for others (held, its reservations made
// below it stay, to be replaced by the next try).
func (tr *Tree) reserveUp(ctx context.Context, run *runrec.Run, in, out int) (int, *heldAbove, error) {
	for id := run.ParentID; id != ""; {
		var stop *Stop
		var held *heldAbove
		fit := out
		a, err := tr.Runs.Update(ctx, id, func(a *runrec.Run) (bool, error) {
			stop, held, fit = nil, nil, out
			now := tr.Now()
			pruned := Release(a, "", -1, now) // expired reservations only
			if t, why := Spent(a); t != "" {
				stop = &Stop{T: t, Detail: fmt.Sprintf("run %s, which this run is nested in, has nothing left: %s", a.ID, why)}
				return pruned, nil
			}
			if !Budgeted(a) {
				return pruned, nil
			}
			f, free, t, why := tr.answerFit(a, run.Model, run.ID, in, now)
			if f < MinAnswerTokens {
				if free >= MinAnswerTokens {
					held = &heldAbove{id: a.ID, until: firstExpiry(a, run.ID)}
				} else {
					stop = &Stop{T: t, Detail: fmt.Sprintf("run %s, which this run is nested in, with its nested runs %s", a.ID, why)}
				}
				return pruned, nil
			}
			fit = min(out, f)
			Reserve(a, runrec.Reservation{Run: run.ID, Step: run.Step, Tokens: in + fit,
				Cost:  tr.Prices.ModelCost(run.Model, provider.Usage{InputTokens: in, OutputTokens: fit}),
				Until: sooner(now.Add(tr.ModelTimeout), run.Deadline).Add(tr.Lease)})

			return true, nil
		})
		if errors.Is(err, runstore.ErrNotFound) {
			return out, nil, nil
		}
		if err != nil {
			return 0, nil, fmt.Errorf("reserve run %s's answer from run %s: %w", run.ID, id, err)
		}
		if stop != nil {
			return 0, nil, stop
		}
		if held != nil {
			return 0, held, nil
		}
		out, id = fit, a.ParentID
	}
	return out, nil, nil
}

// firstExpiry is when the first of the reservations r holds for runs other than run
// expires.
func firstExpiry(r *runrec.Run, run string) time.Time {
	var first time.Time
	for _, h := range r.Reserved {
		if h.Run != run && (first.IsZero() || h.Until.Before(first)) {
			first = h.Until
		}
	}
	return first
}

// sooner is the sooner of a and b, the other when one is zero.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
