// Package runrec is a run's record: the control state the runs bucket stores ([Run],
// its calls, limits, totals, reservations, pause and cancel), the conversation edits
// its run log keeps, and the rules that keep one record consistent (its stored part,
// copies, the API's view, what it used).
//
// Every part of the planner reads and writes these types: the loop and run control
// (package planner), the journal (runstore), the budgets (budget) and the lists
// (runindex). So that none of them depends on another for its data, the types live
// here, below all of them, and hold no behaviour of theirs: how a run takes a step,
// is stored, spends or is listed is the business of those packages. The names a
// user of the planner sees (Run, CallRecord, Limits, …) are also declared in package
// planner, as aliases.
//
// A file name in a comment here (stop.go, pause.go, control.go, …) is the planner's.
package runrec
