package planner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
)

func TestCallKeyIgnoresKeyOrderSpaceAndStringForm(t *testing.T) {
	a := callKey("calc", json.RawMessage(`{"a":1,"b":[2,3]}`))
	for _, args := range []string{`{ "b": [2, 3], "a": 1 }`, `"{\"b\":[2,3],\"a\":1}"`} {
		if b := callKey("calc", json.RawMessage(args)); a != b {
			t.Errorf("callKey(%s) = %q, want the same key as %q", args, b, a)
		}
	}
	if callKey("calc", json.RawMessage(`{"a":1}`)) == callKey("calc", json.RawMessage(`{"a":2}`)) {
		t.Error("different arguments gave the same key")
	}
	if callKey("calc", json.RawMessage(`{"a":1}`)) == callKey("other", json.RawMessage(`{"a":1}`)) {
		t.Error("different tools gave the same key")
	}
	// Large integers keep their digits (no float64 rounding makes two calls equal).
	if callKey("t", json.RawMessage(`{"n":9007199254740993}`)) == callKey("t", json.RawMessage(`{"n":9007199254740992}`)) {
		t.Error("large integers were rounded together")
	}
}

func TestRepeatRun(t *testing.T) {
	x, y := "x", "y"
	tests := []struct {
		name    string
		history []string
		next    string
		want    int
	}{
		{"first call", nil, x, 1},
		{"after a different call", []string{x, y}, x, 1},
		{"third in a row", []string{y, x, x}, x, 3},
		{"broken run", []string{x, x, y, x}, x, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := repeatRun(tt.history, tt.next); got != tt.want {
				t.Errorf("repeatRun(%v, %q) = %d, want %d", tt.history, tt.next, got, tt.want)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	ok := []Limits{{}, {MaxSteps: 1}, {MaxSteps: 100, LoopThreshold: 2, LoopAction: runrec.LoopStop, TokenBudget: 10}}
	for _, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", l, err)
		}
	}
	bad := map[string]Limits{
		"maxSteps":       {MaxSteps: runrec.MaxMaxSteps + 1},
		"tokenBudget":    {TokenBudget: -1},
		"loopThreshold":  {LoopThreshold: 1},
		"loopAction":     {LoopAction: "explode"},
		"maxDepth":       {MaxDepth: 11},
		"errorThreshold": {ErrorThreshold: -2},
	}
	for field, l := range bad {
		err := l.Validate()
		if err == nil {
			t.Errorf("Validate(%+v) = nil, want an error naming %s", l, field)
			continue
		}
		if want := "limits." + field; !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %q, want it to name %q", l, err, want)
		}
	}
	d := Limits{}.WithDefaults()
	if d.MaxSteps != 10 || d.LoopThreshold != 3 || d.MaxDepth != 3 || d.LoopAction != runrec.LoopInject {
		t.Errorf("defaults = %+v", d)
	}
}
