package eventstest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The SDK is the reference of the tests only: no program links it (it brought eleven
// packages into every binary for functions no binary calls).
func TestNoProgramLinksTheSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over every program")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/toolfleet/toolfleet/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/cloudevents/") || strings.HasSuffix(pkg, "/internal/testsupport/eventstest") {
			t.Errorf("a program links %s", pkg)
		}
	}
}
