package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestLimitsAreCheckedAtRegistration(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object"}`)
	run := func(ctx context.Context, args json.RawMessage) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		def  tools.Definition
		want string // "" = accepted
	}{
		{"none", tools.Definition{}, ""},
		{"rate", tools.Definition{RateLimit: &tools.RateLimit{PerSecond: 0.5, Burst: 3}}, ""},
		{"tenant cap and wait", tools.Definition{MaxInFlightPerTenant: 2, LimitWait: tools.Duration(time.Minute)}, ""},
		{"zero rate", tools.Definition{RateLimit: &tools.RateLimit{}}, "rateLimit.perSecond"},
		{"negative rate", tools.Definition{RateLimit: &tools.RateLimit{PerSecond: -1}}, "rateLimit.perSecond"},
		{"negative burst", tools.Definition{RateLimit: &tools.RateLimit{PerSecond: 1, Burst: -1}}, "rateLimit.burst"},
		{"negative cap", tools.Definition{MaxInFlightPerTenant: -1}, "maxInFlightPerTenant"},
		{"negative wait", tools.Definition{MaxInFlightPerTenant: 1, LimitWait: -1}, "limitWait"},
		{"wait too long", tools.Definition{MaxInFlightPerTenant: 1, LimitWait: tools.Duration(time.Hour)}, "limitWait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := tc.def
			def.Name, def.Parameters, def.Safe = "limited", schema, true
			err := tools.NewRegistry().AddFunc(def, run)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("AddFunc: %v", err)
				}
				return
			}
			if !errors.Is(err, tools.ErrInvalidDefinition) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AddFunc = %v, want invalid_definition naming %s", err, tc.want)
			}
		})
	}
}

func TestLimitDefaults(t *testing.T) {
	t.Parallel()
	var d tools.Definition
	if d.HasLimits() || d.EffectiveLimitWait() != tools.DefaultLimitWait {
		t.Fatalf("zero definition: HasLimits %v, wait %s", d.HasLimits(), d.EffectiveLimitWait())
	}
	if (tools.RateLimit{PerSecond: 1}).EffectiveBurst() != 1 {
		t.Fatal("burst 0 must mean 1")
	}
	if tools.CodeRateLimited.Retryable() {
		t.Fatal("rate_limited must never be retried by the fleet")
	}
	b, _ := json.Marshal(&tools.Error{Code: tools.CodeRateLimited, Message: "m", RetryAfterMS: 1500})
	if !strings.Contains(string(b), `"retry_after_ms":1500`) {
		t.Fatalf("error JSON %s lacks retry_after_ms", b)
	}
}
