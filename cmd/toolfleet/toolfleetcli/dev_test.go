package toolfleetcli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// dev -model, -prices and -tools-file together, as a user tries them: a scripted model
// of their own calls a command tool of their tools file (tr a-z A-Z), and a run with a
// cost budget is accepted and reports what it cost.
func TestDevPricesToolsFileModel(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tr, err := exec.LookPath("tr")
	if err != nil {
		t.Skip("no tr")
	}
	toolsFile := write("tools.yaml", `
tools:
  - name: upper
    description: Upper-case the arguments.
    safe: true
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    command: {argv: [`+tr+`, a-z, A-Z], timeout: 5s}
`)
	script := write("upper.yaml", `
steps:
  - calls: [{name: upper, arguments: {text: hello}}]
  - when: {tool: upper, contains: HELLO}
    text: It says HELLO.
`)
	prices := write("prices.yaml", "models:\n  scripted/upper: {inputPerMTok: 1000, outputPerMTok: 2000}\ntools:\n  upper: 0.5\n")
	cmd, err := Parse([]string{"dev", "-model", "scripted/" + script, "-prices", prices, "-tools-file", toolsFile}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := cmd.Dev
	o.HTTPAddr, o.Out = ":0", &bytes.Buffer{}
	a, stop := startDev(t, o)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("dev returned %v", err)
		}
	}()

	var v planner.RunView
	code := call(t, "POST", a.API+"/v1/runs",
		`{"input":"shout hello","tools":["upper"],"wait":true,"waitTimeout":"20s","limits":{"costBudget":10}}`, &v)
	if code != 200 || v.Status != planner.StatusDone || v.Answer != "It says HELLO." {
		t.Fatalf("run: %d %+v", code, v)
	}
	if v.Model != "scripted/upper" || v.CostBudget != 10 || v.Cost < 0.5 || len(v.Calls) != 1 ||
		!strings.Contains(string(v.Calls[0].Output), "HELLO") {
		t.Errorf("run: model %s, cost %v of %v, calls %+v", v.Model, v.Cost, v.CostBudget, v.Calls)
	}
}

// Bad dev flag values exit 2 and say which flag.
func TestDevBadFlags(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	dir := t.TempDir()
	badPrices := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(badPrices, []byte("models: [1, 2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badTools := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(badTools, []byte("tools: [{name: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"prices missing", []string{"-prices", filepath.Join(dir, "none.yaml")}, "-prices (TOOLFLEET_PRICES_FILE)"},
		{"prices malformed", []string{"-prices", badPrices}, "-prices (TOOLFLEET_PRICES_FILE)"},
		{"tools file missing", []string{"-tools-file", filepath.Join(dir, "none.yaml")}, "-tools-file (TOOLFLEET_TOOLS_FILE)"},
		{"tools file malformed", []string{"-tools-file", badTools}, "tools.yaml"},
		{"model unknown", []string{"-model", "bogus"}, "want <provider>/<model>"},
		{"operator role malformed", []string{"-operator-roles", "ops,bad role"}, "-operator-roles (TOOLFLEET_OPERATOR_ROLES)"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"dev", "-nats-port", "-1", "-http", "127.0.0.1:0", "-data", t.TempDir()}, tc.args...)
		code := MainContext(context.Background(), args, io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%s: exit %d (want 2), stderr:\n%s", tc.name, code, stderr.String())
		}
	}
}
