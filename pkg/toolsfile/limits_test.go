package toolsfile

import (
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A tools file declares a tool's limits with the definition's own field names, and a
// limit out of range is refused when the tool is registered.
func TestLimitsInAToolsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script(t, dir, "ok.sh", "cat")
	specs, err := Load(writeFile(t, dir, "tools.yaml", `
tools:
  - name: search
    safe: true
    parameters: {type: object}
    rateLimit: {perSecond: 5, burst: 2}
    maxInFlightPerTenant: 3
    limitWait: 2s
    command: {argv: [./ok.sh]}
`))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	d := specs[0].Definition
	if d.RateLimit == nil || d.RateLimit.PerSecond != 5 || d.RateLimit.Burst != 2 || d.MaxInFlightPerTenant != 3 ||
		d.LimitWait.D() != 2*time.Second || !d.HasLimits() {
		t.Fatalf("definition = %+v (rate %+v)", d, d.RateLimit)
	}
	if err := Register(tools.NewRegistry(), specs); err != nil {
		t.Fatalf("Register: %v", err)
	}

	bad, err := Load(writeFile(t, dir, "bad.yaml", `
tools:
  - name: search
    parameters: {type: object}
    rateLimit: {perSecond: 0}
    command: {argv: [./ok.sh]}
`))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := Register(tools.NewRegistry(), bad); err == nil || !strings.Contains(err.Error(), "rateLimit.perSecond") {
		t.Fatalf("Register with perSecond 0 = %v, want an error naming rateLimit.perSecond", err)
	}
}
