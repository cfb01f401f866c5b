package runrec

// ForkPoint names where a run was forked from (the planner's fork.go): the run, and the
// step the fork took anew; the fork's conversation is that run's up to the start of
// that step, and the fork's step 0 is that step taken again.
type ForkPoint struct {
	Run  string `json:"run"`
	Step int    `json:"step"`
}
