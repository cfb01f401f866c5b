package toolsfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

func writeFile(t testing.TB, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadChecksMCPServers(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
mcpServers:
  - name: none
  - name: both
    command: {argv: [sh]}
    http: {url: "http://x/mcp"}
  - name: bad.name
    command: {argv: [./missing-server]}
  - name: web
    http:
      url: "ftp://x/mcp"
      headers: {Authorization: "Bearer ${secret:TOKEN}"}
  - name: fs
    command: {argv: [sh], env: {TOKEN: x}}
    secrets: [{name: TOKEN}]
    defaults: {name: nope}
    tools:
      read: {name: "has space", timeout: -1}
  - name: fs
    command: {argv: [sh]}
  - name: other
    command: {argv: [sh]}
    colour: blue
`)
	_, err := toolsfile.LoadFile(path)
	if !errors.Is(err, toolsfile.ErrInvalidFile) {
		t.Fatalf("LoadFile: %v, want ErrInvalidFile", err)
	}
	for _, want := range []string{
		"mcpServers 1 (none): no transport",
		"mcpServers 2 (both): both command and http",
		`mcpServers 3 (bad.name): name "bad.name" must match`,
		"program ./missing-server",
		`url "ftp://x/mcp" must be an absolute http or https URL`,
		"references ${secret:TOKEN}, which is not in the tool's secrets",
		`unknown field "colour"`,
		"already used by",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFile error does not say %q:\n%v", want, err)
		}
	}
	path = writeFile(t, "tools.yaml", `
mcpServers:
  - name: fs
    command: {argv: [sh], env: {TOKEN: x}}
    secrets: [{name: TOKEN}]
    defaults: {name: nope}
    tools:
      read: {name: "has space", timeout: -1}
`)
	_, err = toolsfile.LoadFile(path)
	for _, want := range []string{"secret TOKEN clashes", "defaults: name is per tool", `tools: read: name "has space" must match`, "tools: read: timeout cannot be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFile error does not say %q:\n%v", want, err)
		}
	}
	// Load, which cannot connect, refuses a file with servers and says what to use.
	path = writeFile(t, "tools.yaml", "mcpServers:\n  - {name: fs, command: {argv: [sh]}}\n")
	if _, err := toolsfile.Load(path); !errors.Is(err, toolsfile.ErrInvalidFile) || !strings.Contains(err.Error(), "LoadFile") {
		t.Errorf("Load of a file with mcpServers: %v, want a refusal pointing to LoadFile", err)
	}
	f, err := toolsfile.LoadFile(path)
	if err != nil || len(f.MCPServers) != 1 || len(f.Tools) != 0 {
		t.Errorf("LoadFile: %+v, %v", f, err)
	}
}

// A stdio MCP server declared in a tools file, served by an executor on JetStream and
// called by a client as any fleet tool.
func TestMCPServerThroughTheFleet(t *testing.T) {
	bin := mcptooltest.BuildStdioServer(t)
	t.Setenv("TOOLFLEET_SECRET_TEST_TOKEN", "tok-123")
	path := writeFile(t, "tools.yaml", `
tools:
  - name: local_echo
    safe: true
    parameters: {type: object}
    command: {argv: [cat]}
mcpServers:
  - name: test
    prefix: t
    command:
      argv: [`+bin+`]
      env: {STDIOSERVER_REQUIRE: TEST_TOKEN}
    secrets: [{name: TEST_TOKEN}]
    defaults: {safe: true}
    tools:
      echo: {safe: false}
      add: {idempotent: true, timeout: 5s}
`)
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := tools.NewRegistry()
	var logs opstest.Log
	servers, err := file.Start(ctx, reg, zerolog.New(&logs).Level(zerolog.DebugLevel), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer servers.Close()
	for _, name := range []string{"local_echo", "t_add", "t_echo", "t_fail", "t_crash", "t_stats"} {
		if _, ok := reg.Lookup(name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}

	c, fleetCtx := serve(t, reg)
	call := func(tool, args string) (events.Result, error) {
		t.Helper()
		return callTool(fleetCtx, t, c, tool, args)
	}
	stats := func() map[string]int {
		t.Helper()
		res, err := call("t_stats", `{}`)
		if err != nil {
			t.Fatalf("t_stats: %v", err)
		}
		var s struct{ Counts map[string]int }
		if err := json.Unmarshal(res.Output, &s); err != nil {
			t.Fatal(err)
		}
		return s.Counts
	}

	res, err := call("t_add", `{"a":20,"b":22}`)
	if err != nil || string(res.Output) != `{"sum":42}` || !res.Validated {
		t.Fatalf("t_add: %+v %v, want {\"sum\":42}", res, err)
	}

	// A schema violation is answered invalid by the executor and never reaches the server.
	res, err = call("t_add", `{"a":"twenty","b":22}`)
	if res.Status != events.StatusInvalid || !errors.Is(err, tools.ErrInvalidInput) {
		t.Errorf("t_add with a string: %s %v, want invalid", res.Status, err)
	}
	if n := stats()["add"]; n != 1 {
		t.Errorf("the server counted %d calls of add, want 1 (the invalid one refused before)", n)
	}

	// isError is an error result with what the tool said.
	res, err = call("t_fail", `{}`)
	if res.Status != events.StatusError || !errors.Is(err, tools.ErrToolFailedPermanent) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("t_fail: %s %v, want error tool_error_permanent saying boom", res.Status, err)
	}

	// An unsafe imported tool waits for an approval.
	w, err := c.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	echoed := make(chan events.Result, 1)
	go func() {
		res, _ := call("t_echo", `{"text":"approved words"}`)
		echoed <- res
	}()
	_, req, err := w.Next()
	if err != nil || req.Tool != "t_echo" {
		t.Fatalf("approval request: %+v %v, want one for t_echo", req, err)
	}
	if err := c.Answer(ctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if res := <-echoed; res.Status != events.StatusOK || string(res.Output) != `"approved words"` {
		t.Errorf("t_echo after approval: %+v", res)
	}

	// The server dying mid-call is a clear error; the next call gets a fresh process.
	res, err = call("t_crash", `{}`)
	if res.Status != events.StatusError || !strings.Contains(err.Error(), "connection to MCP server test was lost during the call") {
		t.Errorf("t_crash: %s %v, want an error saying the server went away", res.Status, err)
	}
	if res.Attempts != 1 {
		t.Errorf("t_crash ran %d times; an imported tool is not idempotent by default", res.Attempts)
	}
	res, err = call("t_add", `{"a":1,"b":1}`)
	if err != nil || string(res.Output) != `{"sum":2}` {
		t.Errorf("t_add after the crash: %+v %v", res, err)
	}
	// The server's stderr is logged, its secret scrubbed.
	if len(logs.Lines("crashing on purpose")) == 0 || len(logs.Lines("starting with TEST_TOKEN=[redacted:TEST_TOKEN]")) < 2 {
		t.Errorf("the log lacks the server's stderr (two starts, a crash):\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "tok-123") {
		t.Errorf("the log shows the secret:\n%s", logs.String())
	}

	// list_changed: the adapter registers the new tool (the executor serves it after a
	// restart; see package mcptool).
	if _, err := call("t_grow", `{"name":"fresh"}`); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "t_fresh registered", func() bool {
		_, ok := reg.Lookup("t_fresh")
		return ok
	})
	// A tool the server no longer lists is answered no_such_tool.
	if _, err := call("t_shrink", `{"name":"picture"}`); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "t_picture unregistered", func() bool {
		_, ok := reg.Lookup("t_picture")
		return !ok
	})
	res, err = call("t_picture", `{}`)
	if !errors.Is(err, tools.ErrNoSuchTool) {
		t.Errorf("t_picture after the server removed it: %s %v, want no_such_tool", res.Status, err)
	}
}

func TestMCPServerOverHTTPWithASecretHeader(t *testing.T) {
	srv, counts := mcptooltest.NewServer(func() {})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer web-secret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	t.Setenv("WEB_TOKEN", "web-secret")
	path := writeFile(t, "tools.json", `{"mcpServers": [{
		"name": "web",
		"http": {"url": "`+hs.URL+`", "headers": {"Authorization": "Bearer ${secret:TOKEN}"}},
		"secrets": [{"name": "TOKEN", "env": "WEB_TOKEN"}],
		"include": ["add", "echo"]
	}]}`)
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	servers, err := file.Start(context.Background(), reg, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer servers.Close()
	if reg.Len() != 2 {
		t.Errorf("%d tools, want web_add and web_echo only", reg.Len())
	}
	d, _ := reg.Lookup("web_add")
	if len(d.Secrets) != 1 || d.Secrets[0].Name != "TOKEN" {
		t.Errorf("web_add secrets %+v, want TOKEN declared (so that the executor scrubs it)", d.Secrets)
	}
	call, err := reg.Hydrate("web_add", []byte(`{"a":3,"b":4}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := call.Run(context.Background()); o.Err != nil || string(o.Output) != `{"sum":7}` || counts.Get("add") != 1 {
		t.Errorf("web_add: %s %v", o.Output, o.Err)
	}
}

func TestMCPServerThatCannotStartIsAClearError(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
tools:
  - name: local_echo
    parameters: {type: object}
    command: {argv: [cat]}
mcpServers:
  - name: broken
    command: {argv: [sh, -c, "echo 'cannot open the database' >&2; exit 4"]}
    connectTimeout: 500ms
`)
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	_, err = file.Start(context.Background(), reg, zerolog.Nop(), nil)
	if err == nil {
		t.Fatal("Start succeeded")
	}
	for _, want := range []string{"mcpServers 1 (broken)", "no connection within 500ms", "cannot open the database"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if reg.Len() != 0 {
		t.Errorf("%d tools registered after the failure, want none", reg.Len())
	}
}

func TestMCPServerWithAMissingSecretFailsAtOnce(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
mcpServers:
  - name: web
    secrets: [{name: NOPE_TOKEN}]
    http:
      url: http://127.0.0.1:1/mcp
      headers: {Authorization: "Bearer ${secret:NOPE_TOKEN}"}
`)
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, err = file.Start(context.Background(), tools.NewRegistry(), zerolog.Nop(), nil)
	if err == nil || !strings.Contains(err.Error(), "TOOLFLEET_SECRET_NOPE_TOKEN") || !strings.Contains(err.Error(), "(web)") {
		t.Fatalf("Start: %v, want an error naming the server and where the secret was looked for", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Start took %s to report a missing secret, want no retries", d)
	}
}
