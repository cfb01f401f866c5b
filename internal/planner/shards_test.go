package planner

import (
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// Runs do not notice shards: nested runs (whose answer the planner publishes as a
// result), a planner killed mid-run, two replicas sharing runs, approvals and payloads
// by reference pass on three shards as on one.
func TestSuitesOnShards(t *testing.T) {
	natstest.RerunOnShards(t, 3, "^(TestNestedRunAndDepthLimit|TestPlannerKilledMidRun|TestTwoReplicasShareARun|"+
		"TestResultBeforeItsStepIsStored|TestApprovals|TestFiveMegabyteOutputByReference|TestFiveMegabyteArgumentsByReference)$")
}
