package budget

import (
	"math"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
)

// A reservation is keyed by run and step: the same step reserved again (taken again
// after its replica died) replaces it; a charge settles the steps its totals include,
// not the next one; an expired reservation counts for nothing and goes with the next
// change.
func TestReservationsAreKeyedByRunAndStep(t *testing.T) {
	now := time.Now()
	r := &runrec.Run{}
	Reserve(r, runrec.Reservation{Run: "c1", Step: 1, Cost: 0.5, Tokens: 50, Until: now.Add(time.Minute)})
	Reserve(r, runrec.Reservation{Run: "c1", Step: 1, Cost: 0.4, Tokens: 40, Until: now.Add(time.Minute)}) // taken again
	Reserve(r, runrec.Reservation{Run: "c2", Step: 3, Cost: 0.2, Tokens: 20, Until: now.Add(time.Minute)})
	Reserve(r, runrec.Reservation{Run: "c3", Step: 0, Cost: 9, Tokens: 900, Until: now.Add(-time.Second)}) // expired
	if cost, tokens := Held(r, "c2", now); !near(cost, 0.4) || tokens != 40 {
		t.Fatalf("held for others than c2: %g, %d tokens; want c1's second reservation only", cost, tokens)
	}
	if Release(r, "c1", 0, now); len(r.Reserved) != 2 {
		t.Fatalf("a charge of c1's step 0 left %+v; want c1's step 1 and c2's (the expired one gone)", r.Reserved)
	}
	if Release(r, "c1", 1, now); len(r.Reserved) != 1 || r.Reserved[0].Run != "c2" {
		t.Fatalf("a charge of c1's step 1 left %+v", r.Reserved)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
