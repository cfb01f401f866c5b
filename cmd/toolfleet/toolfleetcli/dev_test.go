package toolfleetcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
	"github.com/toolfleet/toolfleet/pkg/events"
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

// Bad dev flag values exit 2 and say which flag, before any port is bound: the ports
// dev is given are all taken (as a dev already running takes 4222, 8080 and 9090), and
// the configuration's error is still the one reported.
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
	taken := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().String()
	}
	httpAddr, opsAddr := taken(), taken()
	_, natsPort, _ := net.SplitHostPort(taken())
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"prices missing", []string{"-prices", filepath.Join(dir, "none.yaml")}, "-prices (TOOLFLEET_PRICES_FILE)"},
		{"prices malformed", []string{"-prices", badPrices}, "-prices (TOOLFLEET_PRICES_FILE)"},
		{"tools file missing", []string{"-tools-file", filepath.Join(dir, "none.yaml")}, "-tools-file (TOOLFLEET_TOOLS_FILE)"},
		{"tools file malformed", []string{"-tools-file", badTools}, "tools.yaml"},
		{"model unknown", []string{"-model", "bogus"}, "-model (TOOLFLEET_MODEL) bogus: model configuration"},
		{"operator role malformed", []string{"-operator-roles", "ops,bad role"}, "-operator-roles (TOOLFLEET_OPERATOR_ROLES)"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"dev", "-host", "127.0.0.1", "-nats-port", natsPort, "-http", httpAddr, "-ops-addr", opsAddr,
			"-data", t.TempDir()}, tc.args...)
		code := MainContext(context.Background(), args, io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%s: exit %d (want 2), stderr:\n%s", tc.name, code, stderr.String())
		}
	}
}

// The demo's scripted model takes part in a conversation: a run whose write is denied
// says so (no claim of a report), and two follow-ups are both answered, the run done
// again each time, never model_error.
func TestDevDemoDeniedThenFollowUps(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	a, stop := startDev(t, DevOptions{HTTPAddr: ":0", Out: io.Discard})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("dev returned %v", err)
		}
	}()
	body, _ := json.Marshal(map[string]any{"input": demoInput, "tools": demoTools})
	var v planner.RunView
	if code := call(t, http.MethodPost, a.API+"/v1/runs", string(body), &v); code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %+v", code, v)
	}
	runID := v.ID
	var callID string
	natstest.EventuallyNil(t, 30*time.Second, "write_file to await an approval", func() error {
		call(t, http.MethodGet, a.API+"/v1/runs/"+runID, "", &v) // polling the API, as a client would
		for _, c := range v.Calls {
			if c.Name == "write_file" && awaiting(v, c.ID) {
				callID = c.ID
				return nil
			}
		}
		return fmt.Errorf("the run is %+v", v)
	})
	if code := call(t, http.MethodPost, a.API+"/v1/approvals/"+callID, `{"decision":"deny","reason":"not today"}`, nil); code != http.StatusAccepted {
		t.Fatalf("deny: %d", code)
	}
	v = waitDone(t, a.API, runID, 1)
	if !strings.Contains(v.Answer, "not approved, so I did not write it") {
		t.Errorf("after a denial the answer is %q", v.Answer)
	}
	for i, input := range []string{"Why not?", "Write it anyway."} {
		var f planner.RunView
		if code := call(t, http.MethodPost, a.API+"/v1/runs/"+runID+"/messages",
			`{"input":"`+input+`","wait":true,"waitTimeout":"20s"}`, &f); code >= 300 {
			t.Fatalf("follow-up %d: %d %+v", i+1, code, f)
		}
		f = waitDone(t, a.API, runID, i+2)
		if f.Termination != planner.TerminationCompleted || !strings.Contains(f.Answer, "offline scripted demo model") {
			t.Errorf("follow-up %d: %s %s %q (%s)", i+1, f.Status, f.Termination, f.Answer, f.Detail)
		}
	}
}

// waitDone polls the run until it is done for the turn-th time (a follow-up continues a
// done run).
func waitDone(t *testing.T, api, runID string, turn int) planner.RunView {
	t.Helper()
	var v planner.RunView
	natstest.EventuallyNil(t, 30*time.Second, fmt.Sprintf("run %s to be done (turn %d)", runID, turn), func() error {
		call(t, http.MethodGet, api+"/v1/runs/"+runID, "", &v)
		if v.Status != planner.StatusDone || v.Turn < turn-1 {
			return fmt.Errorf("the run is %+v", v)
		}
		return nil
	})
	return v
}

// dev's MCP edge has the fleet's operator roles, as its planner and executor do: an
// operator sees another role's task over MCP (tasks/get), which another role that is
// none may not. Before, the edge had none, and refused the operator too.
func TestDevMCPEdgeHasTheOperatorRoles(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	tokens := map[string]events.Identity{}
	for token, id := range map[string]events.Identity{"user": {Tenant: "acme", Role: "user"}, "ops": {Tenant: "acme", Role: "ops"},
		"admin": {Tenant: "acme", Role: "admin"}} {
		tokens[plannerapi.HashToken(token)] = id
	}
	a, stop := startDev(t, DevOptions{HTTPAddr: ":0", Out: io.Discard, Tokens: tokens, Fleet: Options{OperatorRoles: []string{"ops"}}})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("dev returned %v", err)
		}
	}()
	var created struct {
		TaskID string `json:"taskId"`
	}
	if rerr := mcpTask(t, a.API+"/mcp", "user", "tools/call", "calculator",
		map[string]any{"name": "calculator", "arguments": map[string]string{"expression": "6*7"}}, &created); rerr != nil || created.TaskID == "" {
		t.Fatalf("a task of acme's user: %s %+v", created.TaskID, rerr)
	}
	var seen struct {
		Status string `json:"status"`
	}
	if rerr := mcpTask(t, a.API+"/mcp", "ops", "tasks/get", created.TaskID, map[string]any{"taskId": created.TaskID}, &seen); rerr != nil || seen.Status == "" {
		t.Errorf("the operator's tasks/get: %+v %+v", seen, rerr)
	}
	if rerr := mcpTask(t, a.API+"/mcp", "admin", "tasks/get", created.TaskID, map[string]any{"taskId": created.TaskID}, &seen); rerr == nil || rerr.Code != -32001 {
		t.Errorf("another role's tasks/get: %+v; want -32001", rerr)
	}
}

// mcpError is a JSON-RPC error.
type mcpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// mcpTask posts one request of the MCP tasks extension (2026-07-28, stateless) with the
// bearer token, and decodes its result into v; it returns the error the edge answered.
func mcpTask(t *testing.T, url, token, method, name string, params map[string]any, v any) *mcpError {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name, "Authorization": "Bearer " + token} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *mcpError       `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("%s: status %d, %v", method, resp.StatusCode, err)
	}
	if answer.Error == nil {
		if err := json.Unmarshal(answer.Result, v); err != nil {
			t.Fatalf("%s: %s: %v", method, answer.Result, err)
		}
	}
	return answer.Error
}

// dev's banner says what its model will do: the demo's script is followed whatever the
// input, a script of the user's own is not the demo's (its example is the echo model's,
// which answers with the tool's result), a real model gets a question.
func TestDevBannerSaysWhatTheModelDoes(t *testing.T) {
	a := DevAddrs{API: runs.DefaultURL, NATS: defaultNATSURL}
	for _, c := range []struct {
		model     string
		want, not []string
	}{
		{ScriptedModelName, []string{"it follows the demo's script whatever the input", `toolfleet run "Total the orders and write a report"`}, nil},
		{"scripted/upper", []string{"model: scripted/upper, a scripted model — no LLM; it answers from its script",
			`toolfleet run 'calculator {"expression": "6*7"}' --model scripted/echo --tools calculator --wait`}, []string{"follows the demo's script", "Total the orders"}},
		{"openai/gpt-4o-mini", []string{"model: openai/gpt-4o-mini\n", `toolfleet run "What is 6*7?"`}, []string{"scripted"}},
	} {
		var out bytes.Buffer
		printDevHelp(&out, a, false, false, c.model)
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: the banner lacks %q:\n%s", c.model, w, out.String())
			}
		}
		for _, n := range c.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("%s: the banner says %q:\n%s", c.model, n, out.String())
			}
		}
	}
}
