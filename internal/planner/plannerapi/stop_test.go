package plannerapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
)

// costPrices prices the main model and the add tool (as the planner's cost tests do).
var costPrices = planner.PriceTable{
	Models: map[string]planner.ModelPrice{"main": {InputPerMTok: 1, OutputPerMTok: 2}},
	Tools:  map[string]float64{"add": 0.001},
}

// The API takes stopWhen, stopHook and limits.costBudget in the run request, and shows
// the run's cost.
func TestStopAndCostOverTheAPI(t *testing.T) {
	b := setup(t, nil)
	b.swapPlanner(t, planner.Config{Models: map[string]provider.Model{"main": plannertest.Model(t, plannertest.StopScript)}, Prices: costPrices})
	api := httptest.NewServer(Handler(b.p, Auth{}))
	defer api.Close()
	post := func(body string) (int, planner.RunView) {
		t.Helper()
		resp, err := http.Post(api.URL+"/v1/runs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v planner.RunView
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	status, v := post(`{"input":"go","tools":["add","echo"],"stopWhen":[{"tool":"echo"}],"stopHook":{"subject":"hooks.none","timeout":"50ms"},"limits":{"costBudget":1},"wait":true}`)
	if status != http.StatusOK || v.Termination != planner.TerminationStopCondition || v.Cost <= 0 || v.CostBudget != 1 {
		t.Fatalf("status %d, run %+v", status, v)
	}
	if status, _ := post(`{"input":"go","stopWhen":[{"outputMatches":"("}]}`); status != http.StatusBadRequest {
		t.Fatalf("a bad stopWhen: status %d", status)
	}
}
