// Package budget is what runs may spend: prices of models and tool calls
// ([PriceTable], the -prices file), the checks of a run's limits against its tree's
// totals (steps, tokens, cost), the limits a nested run starts with, and the charges
// and reservations that make those limits hold for a whole tree of runs ([Tree]).
//
// Budgets over a tree of runs: a nested run (run_agent) draws from what its ancestors
// have left, and its usage counts against each of them as it happens.
//
// Each run keeps its own usage (Usage, Cost, its steps) and Nested, what its nested
// runs used; its tree totals are the sum (runrec.Run.Tree). A nested run's tree totals
// are charged to its parent's control state by compare-and-set, on the parent's
// run_agent call that started it (CallRecord.Nested, with the charge's sequence number
// TreeSeq), and the parent's Nested changes by the difference; the parent's own tree
// totals then go to its parent the same way, up to the root (at most Limits.MaxDepth,
// ≤ 10, writes: [Tree.RollUp]). A charge carries the totals, not an increment:
// repeating one (a step taken again after a crash) changes nothing, a later one
// replaces an earlier one whatever order they arrive in, and a charge that was lost is
// made good by the next. A run's value does not grow with its length: the parent keeps
// one charge per call of its current step, and one reservation per model call under way
// in its tree (reserve.go: [Tree.Answer]), which the charges settle.
//
// The planner decides when: it checks a run before its model is asked, reserves the
// answer, charges a step before its calls go out and a nested run's end when it comes.
// Why charges and not JetStream counters is in the planner's package doc.
package budget
