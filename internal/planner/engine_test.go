package planner

import "testing"

// The ids of the runs a planner makes, new and nested at any depth, are known as
// planner runs; ids that callers of the fleet choose for their own calls are not.
func TestPlannerRun(t *testing.T) {
	t.Parallel()
	root := newRunID()
	child := childID(callID(root, 0, 1))
	grandchild := childID(callID(child, 12, 3))
	for _, id := range []string{root, child, grandchild, newRunID()} {
		if !plannerRun(id) {
			t.Errorf("plannerRun(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", "braw", "r", root[:len(root)-1], root + "x", "R" + root[1:],
		callID(root, 0, 1), "c" + root, "c" + root + "_0", child + "_1_2", "cc" + root + "_0_1",
		root[:5] + "-" + root[6:], child[:len(child)-1] + "x", "c" + root + "__1", "c" + root + "_0_1_"} {
		if plannerRun(id) {
			t.Errorf("plannerRun(%q) = true, want false", id)
		}
	}
}
