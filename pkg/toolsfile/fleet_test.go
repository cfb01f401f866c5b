package toolsfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/builtin"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// runExecutor runs an executor of reg, called id, on fx until the test ends.
func runExecutor(t testing.TB, fx *natstest.JetStream, reg *tools.Registry, id string) {
	t.Helper()
	serveExecutor(t, fx.Srv.Connect(), reg, executor.WithExecutorID(id))
}

// serveExecutor runs an executor of reg on nc, with opts, until the test ends, and
// returns once it serves.
func serveExecutor(t testing.TB, nc *nats.Conn, reg *tools.Registry, opts ...executor.Option) {
	t.Helper()
	ex, err := executor.New(nc, reg, append([]executor.Option{executor.WithGracePeriod(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ex.Ready()
}

// startFile loads a tools file and starts it (tools, MCP servers, composites) in a
// fresh registry.
func startFile(t testing.TB, path string) *tools.Registry {
	t.Helper()
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	servers, err := file.Start(context.Background(), reg, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(servers.Close)
	return reg
}

// countingScript is a command that appends a line to log at each run and prints out.
func countingScript(log, out string) string {
	return `[sh, -c, 'cat >/dev/null; echo run >> ` + log + `; echo ''` + out + `''']`
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

type compositeOutput struct {
	Results []struct {
		Name   string          `json:"name"`
		Result json.RawMessage `json:"result"`
	} `json:"results"`
}

// A composite declared in a tools file, over a built-in served by another executor, a
// command tool and an MCP tool of its own file: one tool in the catalog whose schema
// embeds its sub-tools', and each sub-call a real fleet call, answered by the executor
// serving its tool, with its own stored result under the composite's run and its own
// callbacks (the MCP tool's onSuccess). The failing
// sub-call (a division by zero) and the one naming a tool outside the composite do not
// stop the others. Run again for the same call (a retry), the composite gets the stored
// results: nothing runs twice.
func TestCompositeOfBuiltinCommandAndMCPTools(t *testing.T) {
	srv, counts := mcptooltest.NewServer(func() {})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close) // after the MCP connection closes (cleanups run last first)
	ran := filepath.Join(t.TempDir(), "ran.log")
	path := writeFile(t, "tools.yaml", `
tools:
  - name: shout
    description: Shout.
    safe: true
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    command: {argv: `+countingScript(ran, `{"shout":"HI"}`)+`}
  - name: bundle
    description: Math, shouting and adding.
    safe: true
    composite: {tools: [calculator, shout, web_add]}
mcpServers:
  - name: web
    http: {url: "`+hs.URL+`"}
    include: [add]
    defaults: {safe: true}
    callbacks:
      add: {onSuccess: {pointer: /sum}}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	builtins := tools.NewRegistry()
	if err := builtin.Register(builtins, builtin.Config{Enable: []string{"calculator"}}); err != nil {
		t.Fatal(err)
	}
	runExecutor(t, fx, builtins, "builtins")
	reg := startFile(t, path)
	runExecutor(t, fx, reg, "file")

	def, ok := reg.Lookup("bundle")
	if !ok {
		t.Fatal("bundle is not registered")
	}
	var schema struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(def.Parameters, &schema); err != nil || len(schema.Defs) != 3 ||
		!strings.Contains(string(schema.Defs["web_add"]), `"a"`) || !strings.Contains(string(schema.Defs["shout"]), `"text"`) {
		t.Fatalf("bundle's schema is not the union of its sub-tools': %s", def.Parameters)
	}
	if !def.Safe {
		t.Error("bundle of safe tools is not safe")
	}

	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := `{"calls":[
		{"name":"calculator","args":{"expression":"1+2"}},
		{"name":"calculator","args":{"expression":"1/0"}},
		{"name":"nope","args":{}},
		{"name":"shout","args":{"text":"hi"}},
		{"name":"web_add","args":{"a":2,"b":3}}]}`
	res, err := c.Call(ctx, client.Request{Tool: "bundle", ID: "bundle-1", RunID: "run-1", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("bundle: %v (%s)", err, res.Output)
	}
	var out compositeOutput
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out.Results) != 5 {
		t.Fatalf("bundle's output %s: %v", res.Output, err)
	}
	want := []struct{ name, has string }{
		{"calculator", `"result":3`},
		{"calculator", `"code":"tool_error_permanent"`},
		{"nope", `"code":"no_such_tool"`},
		{"shout", `"shout":"HI"`},
		{"web_add", `5`},
	}
	for i, w := range want {
		if got := out.Results[i]; got.Name != w.name || !strings.Contains(string(got.Result), w.has) {
			t.Errorf("result %d = %s %s, want %s with %s", i, got.Name, got.Result, w.name, w.has)
		}
	}

	if got := string(out.Results[4].Result); got != "5" {
		t.Errorf("web_add's result %s, want 5: the MCP tool's onSuccess picks /sum", got)
	}

	// Each sub-call is a fleet call with its own stored result, under the run, answered
	// by the executor that serves its tool.
	for i, w := range []struct{ tool, executor string }{{"calculator", "builtins"}, {"calculator", "builtins"}, {"shout", "file"}, {"web_add", "file"}} {
		pos := []int{0, 1, 3, 4}[i]
		sub, _ := c.Call(ctx, client.Request{Tool: w.tool, ID: toolsfile.SubCallID("bundle-1", pos), RunID: "run-1"})
		if sub.Executor != w.executor || sub.Tool != w.tool || sub.RunID != "run-1" || sub.CallID != "bundle-1-sub-"+string(rune('1'+pos)) {
			t.Errorf("sub-call %d: result %+v, want one of %s by executor %s", pos, sub, w.tool, w.executor)
		}
	}

	// The same composite call again, as a retry would make it: the sub-calls' stored
	// results answer, the tools do not run again.
	spec := findSpec(t, path, "bundle")
	rctx := executor.WithFleet(tools.WithCallInfo(ctx, tools.CallInfo{CallID: "bundle-1", RunID: "run-1", Tool: "bundle", Attempt: 2}),
		executor.Fleet{Conn: fx.NC, Events: fx.Cfg})
	rerun, err := spec.Run(rctx, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(rerun); string(b) != string(res.Output) {
		t.Errorf("the retried composite answered %s, want %s", b, res.Output)
	}
	if n := counts.Get("add"); n != 1 {
		t.Errorf("the MCP tool ran %d times, want once", n)
	}
	if n := lines(t, ran); n != 1 {
		t.Errorf("shout ran %d times, want once", n)
	}
}

// findSpec loads path and returns its tool called name.
func findSpec(t *testing.T, path, name string) toolsfile.Spec {
	t.Helper()
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range file.Tools {
		if s.Definition.Name == name {
			return s
		}
	}
	t.Fatalf("no tool %s in %s", name, path)
	return toolsfile.Spec{}
}

// A composite's sub-tool that no executor serves is answered no_such_tool when called;
// the others run.
func TestCompositeSubToolServedNowhere(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
tools:
  - name: hello
    safe: true
    allowNoSchema: true
    noSchemaMode: full
    command: {argv: [echo, hello]}
  - name: pair
    composite: {tools: [hello, ghost]}
  - name: safe_pair
    safe: true
    composite: {tools: [hello, ghost]}
  - name: pair_of_safe
    composite: {tools: [hello]}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	reg := startFile(t, path)
	// Safety: a tool served elsewhere counts as unsafe, unless the composite says. Its
	// definition names its sub-tools, those served elsewhere too, for the catalog.
	for name, safe := range map[string]bool{"pair": false, "safe_pair": true, "pair_of_safe": true} {
		if d, _ := reg.Lookup(name); d.Safe != safe {
			t.Errorf("%s: safe %v, want %v", name, d.Safe, safe)
		}
	}
	if d, _ := reg.Lookup("pair"); d.Composite == nil || !slices.Equal(d.Composite.Tools, []string{"hello", "ghost"}) {
		t.Errorf("pair's definition names sub-tools %+v, want [hello ghost]", d.Composite)
	}
	runExecutor(t, fx, reg, "file")
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTool(context.Background(), t, c, "safe_pair", `{"calls":[{"name":"ghost","args":{"x":1}},{"name":"hello","args":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	var out compositeOutput
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out.Results) != 2 ||
		!strings.Contains(string(out.Results[0].Result), `"no_such_tool"`) || string(out.Results[1].Result) != `"hello"` {
		t.Fatalf("safe_pair's output %s", res.Output)
	}
}

// beforeCall's cache: a call whose key arguments were answered before is answered from
// the fleet's bucket and the command does not run; other key values run it; another
// tenant has its own entries.
func TestCacheHitSkipsTheTool(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran.log")
	path := writeFile(t, "tools.yaml", `
tools:
  - name: lookup
    safe: true
    parameters: {type: object, properties: {q: {type: string}, trace: {type: integer}}}
    command: {argv: `+countingScript(ran, `{"answer":42}`)+`}
    callbacks:
      beforeCall: {cache: {key: [/q], ttl: 10m}}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	runExecutor(t, fx, startFile(t, path), "file")
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	for i, args := range []string{`{"q":"a","trace":1}`, `{"q":"a","trace":2}`, `{"trace":3,"q":"a"}`} {
		res, err := callTool(context.Background(), t, c, "lookup", args)
		if err != nil || string(res.Output) != `{"answer":42}` {
			t.Fatalf("call %d: %s %v", i, res.Output, err)
		}
	}
	if n := lines(t, ran); n != 1 {
		t.Fatalf("the tool ran %d times for three calls of one key, want once", n)
	}
	if _, err := callTool(context.Background(), t, c, "lookup", `{"q":"b"}`); err != nil {
		t.Fatal(err)
	}
	if n := lines(t, ran); n != 2 {
		t.Fatalf("the tool ran %d times after a new key, want 2", n)
	}
	kv, err := fx.JS.KeyValue(context.Background(), toolsfile.DefaultCacheBucket)
	if err != nil {
		t.Fatalf("the cache bucket: %v", err)
	}
	keys, err := kv.Keys(context.Background())
	if err != nil || len(keys) != 2 || !strings.HasPrefix(keys[0], "lookup.") {
		t.Fatalf("cache keys %v %v, want two of lookup", keys, err)
	}
}

// A cache whose bucket the executor may not reach (its NATS user lacks the bucket's
// permissions, as in a deployment that kept an older auth.conf) costs the calls their
// cache, never their answers: both calls of one key run the tool and answer (the
// second without trying the bucket: the cache rests after a failure), and the
// executor's log says why, once for the two.
func TestCacheOutOfReachRunsTheToolAndSaysWhy(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran.log")
	path := writeFile(t, "tools.yaml", `
tools:
  - name: lookup
    safe: true
    parameters: {type: object, properties: {q: {type: string}}}
    command: {argv: `+countingScript(ran, `{"answer":42}`)+`}
    callbacks:
      beforeCall: {cache: {key: [/q], ttl: 10m}}
`)
	srv := natstest.StartWith(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "admin"}, {Username: "exec", Password: "exec",
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"},
				Deny: []string{"$JS.API.*.*.KV_toolfleet-cache", "$JS.API.DIRECT.GET.KV_toolfleet-cache.>", "$KV.toolfleet-cache.>"}}}}}
		o.NoAuthUser = "admin"
	})
	fx := natstest.JetStreamOn(t, srv, events.Config{})
	var logged opstest.Log
	serveExecutor(t, srv.Connect(nats.UserInfo("exec", "exec")), startFile(t, path), executor.WithExecutorID("file"),
		executor.WithLogger(zerolog.New(&logged).Level(zerolog.WarnLevel)))
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res, err := callTool(context.Background(), t, c, "lookup", `{"q":"a"}`)
		if err != nil || res.Status != events.StatusOK || string(res.Output) != `{"answer":42}` {
			t.Fatalf("call %d: %s %s %v", i, res.Status, res.Output, err)
		}
	}
	if n := lines(t, ran); n != 2 {
		t.Errorf("the tool ran %d times for two calls without a cache, want 2", n)
	}
	warnings := logged.Lines("cache:")
	if len(warnings) != 1 || !strings.Contains(warnings[0], `"tool":"lookup"`) || !strings.Contains(warnings[0], `"bucket":"toolfleet-cache"`) {
		t.Fatalf("the executor logged %d cache warnings, want one naming the tool and the bucket:\n%s", len(warnings), logged.String())
	}
}

// onSuccess as a pointer replaces the output by a part of it; formatOutput as a template
// then renders the final output. onError as a NATS service replaces a failure's error
// output, and the call still reports its failure with the tool's code.
func TestCallbacksReplaceOutputAndError(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
tools:
  - name: weather
    safe: true
    parameters: {type: object, properties: {city: {type: string}}}
    command: {argv: [sh, -c, 'cat >/dev/null; echo "{\"data\":{\"temp\":21,\"unit\":\"C\"},\"noise\":[1,2,3]}"']}
    callbacks:
      onSuccess: {pointer: /data}
      formatOutput: {template: "{{.output.temp}} degrees {{.output.unit}}"}
  - name: report
    safe: true
    parameters: {type: object, properties: {city: {type: string}}}
    command: {argv: [sh, -c, 'cat >/dev/null; echo "{\"temp\":21}"']}
    callbacks:
      onSuccess: {template: "{{.input.city}}: {{json .output}}"}
  - name: broken
    safe: true
    parameters: {type: object}
    retry: {maxRetries: 0}
    command: {argv: [sh, -c, 'echo "disk on fire" >&2; exit 3']}
    callbacks:
      onError: {service: errors.explain, timeout: 2s}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	var asked atomic.Value
	sub, err := fx.NC.Subscribe("errors.explain", func(m *nats.Msg) {
		asked.Store(string(m.Data))
		_ = m.Respond([]byte(`{"result":{"error":"the tool is down; try the backup tool"}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	runExecutor(t, fx, startFile(t, path), "file")
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTool(context.Background(), t, c, "weather", `{"city":"Oslo"}`)
	if err != nil || string(res.Output) != `"21 degrees C"` {
		t.Fatalf("weather: %s %v, want the template's text", res.Output, err)
	}
	res, err = callTool(context.Background(), t, c, "report", `{"city":"Oslo"}`)
	if err != nil || string(res.Output) != `"Oslo: {\"temp\":21}"` {
		t.Fatalf("report: %s %v, want the template's text over input and output", res.Output, err)
	}
	res, err = callTool(context.Background(), t, c, "broken", `{}`)
	if !errors.Is(err, tools.ErrToolFailed) || res.Status != events.StatusError {
		t.Fatalf("broken: %s %v, want its tool_error kept", res.Status, err)
	}
	if string(res.Output) != `{"error":"the tool is down; try the backup tool"}` {
		t.Errorf("broken's output %s, want the service's", res.Output)
	}
	req, _ := asked.Load().(string)
	if !strings.Contains(req, `"hook":"onError"`) || !strings.Contains(req, "disk on fire") || !strings.Contains(req, `"tool":"broken"`) {
		t.Errorf("the service was asked %s", req)
	}
}

// beforeCall as a service: it answers in the tool's place for some inputs and lets the
// tool run for others.
func TestBeforeCallService(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran.log")
	path := writeFile(t, "tools.yaml", `
tools:
  - name: fetch
    safe: true
    parameters: {type: object, properties: {url: {type: string}}}
    command: {argv: `+countingScript(ran, `"fetched"`)+`}
    callbacks:
      beforeCall: {service: guard.fetch}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	sub, err := fx.NC.Subscribe("guard.fetch", func(m *nats.Msg) {
		if strings.Contains(string(m.Data), "blocked.example") {
			_ = m.Respond([]byte(`{"result":"not fetched: the site is blocked"}`))
			return
		}
		_ = m.Respond([]byte(`{"action":"run"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	runExecutor(t, fx, startFile(t, path), "file")
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTool(context.Background(), t, c, "fetch", `{"url":"http://blocked.example"}`)
	if err != nil || string(res.Output) != `"not fetched: the site is blocked"` || lines(t, ran) != 0 {
		t.Fatalf("blocked fetch: %s %v, ran %d", res.Output, err, lines(t, ran))
	}
	res, err = callTool(context.Background(), t, c, "fetch", `{"url":"http://ok.example"}`)
	if err != nil || string(res.Output) != `"fetched"` || lines(t, ran) != 1 {
		t.Fatalf("allowed fetch: %s %v, ran %d", res.Output, err, lines(t, ran))
	}
}

// A callback that fails (its service has no responder; a pointer not in the output) is
// reported as the call's callback_failed, naming it; the executor goes on serving the
// tool and the others, and in a composite the other sub-calls run.
func TestFailingCallbackIsReportedAndExecutionGoesOn(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
tools:
  - name: audited
    safe: true
    parameters: {type: object, properties: {n: {type: integer}}}
    command: {argv: [sh, -c, 'cat']}
    callbacks:
      onSuccess: {service: audit.nobody, timeout: 200ms}
  - name: picky
    safe: true
    parameters: {type: object, properties: {n: {type: integer}}}
    command: {argv: [sh, -c, 'cat']}
    callbacks:
      formatOutput: {pointer: /missing}
  - name: plain
    safe: true
    parameters: {type: object, properties: {n: {type: integer}}}
    command: {argv: [sh, -c, 'cat']}
  - name: all
    composite: {tools: [audited, plain]}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	runExecutor(t, fx, startFile(t, path), "file")
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ tool, names string }{{"audited", "onSuccess"}, {"picky", "formatOutput"}} {
		res, err := callTool(context.Background(), t, c, w.tool, `{"n":1}`)
		if !errors.Is(err, tools.ErrCallbackFailed) || !strings.Contains(string(res.Output), w.names) || res.Attempts != 1 {
			t.Errorf("%s: %s %v (attempts %d), want callback_failed naming %s, not retried", w.tool, res.Output, err, res.Attempts, w.names)
		}
	}
	res, err := callTool(context.Background(), t, c, "plain", `{"n":2}`)
	if err != nil || string(res.Output) != `{"n":2}` {
		t.Errorf("plain after the failures: %s %v", res.Output, err)
	}
	res, err = callTool(context.Background(), t, c, "all", `{"calls":[{"name":"audited","args":{"n":3}},{"name":"plain","args":{"n":4}}]}`)
	if err != nil || !strings.Contains(string(res.Output), `"callback_failed"`) || !strings.Contains(string(res.Output), `{"name":"plain","result":{"n":4}}`) {
		t.Errorf("composite: %s %v", res.Output, err)
	}
}

// A retry rule on the error: the command failing with a message the rule matches is
// retried (and then succeeds); failing with another message, it is not. An HTTP tool's
// 409, permanent by default, is retried when the rule names the status.
func TestRetryRuleOnTheError(t *testing.T) {
	dir := t.TempDir()
	var hits atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "busy", http.StatusConflict)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer hs.Close()
	// Fails with $MSG on its first run, succeeds after.
	flaky := func(name, msg string) string {
		mark := filepath.Join(dir, name)
		return `
  - name: ` + name + `
    safe: true
    parameters: {type: object}
    retry: {initialBackoff: 10ms, maxRetries: 2, when: {message: "temporar(y|ily)", exitCode: [75]}}
    command: {argv: [sh, -c, 'cat >/dev/null; if [ -e ` + mark + ` ]; then echo done; else touch ` + mark + `; echo "` + msg + `" >&2; exit 75; fi']}`
	}
	path := writeFile(t, "tools.yaml", "tools:"+flaky("glitchy", "temporary glitch")+flaky("burning", "disk on fire")+`
  - name: booking
    safe: true
    parameters: {type: object}
    retry: {initialBackoff: 10ms, when: {httpStatus: [409]}}
    http: {url: "`+hs.URL+`"}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	runExecutor(t, fx, startFile(t, path), "file")
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTool(context.Background(), t, c, "glitchy", `{}`)
	if err != nil || res.Attempts != 2 || string(res.Output) != `"done"` {
		t.Errorf("glitchy: %s %v after %d attempts, want done after 2", res.Output, err, res.Attempts)
	}
	res, err = callTool(context.Background(), t, c, "burning", `{}`)
	if !errors.Is(err, tools.ErrToolFailed) || res.Attempts != 1 || !strings.Contains(string(res.Output), "disk on fire") {
		t.Errorf("burning: %s %v after %d attempts, want its failure after 1", res.Output, err, res.Attempts)
	}
	res, err = callTool(context.Background(), t, c, "booking", `{}`)
	if err != nil || res.Attempts != 2 || hits.Load() != 2 {
		t.Errorf("booking: %s %v after %d attempts (%d requests), want ok after 2", res.Output, err, res.Attempts, hits.Load())
	}
}

// Bad composite, callback and retry entries are all reported at once, each naming its
// tool.
func TestLoadRefusesBadCompositesCallbacksAndRetryRules(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
tools:
  - name: a
    composite: {tools: []}
  - name: b
    composite: {tools: [b, x, x, "bad name"]}
  - name: c
    parameters: {type: object}
    composite: {tools: [a]}
    command: {argv: [echo]}
  - name: d
    composite: {tools: [e], colour: red}
  - name: e
    composite: {tools: [d]}
  - name: f
    parameters: {type: object}
    command: {argv: [echo]}
    callbacks:
      beforeCall: {cache: {ttl: 0, key: [q], bucket: "a.b"}}
      onSuccess: {pointer: /a, template: "x"}
      onError: {service: "toolfleet.call.x"}
      formatOutput: {template: "{{.output"}
  - name: g
    parameters: {type: object}
    command: {argv: [echo]}
    retry: {when: {message: "(", httpStatus: [42]}}
  - name: h
    parameters: {type: object}
    command: {argv: [echo]}
    retry: {when: {}, retryIf: [x]}
  - name: i
    parameters: {type: object}
    command: {argv: [echo]}
    callbacks: {before: {}}
mcpServers:
  - name: m
    command: {argv: [sh]}
    callbacks: {add: {onSuccess: {}}}
`)
	_, err := toolsfile.LoadFile(path)
	if !errors.Is(err, toolsfile.ErrInvalidFile) {
		t.Fatalf("LoadFile = %v, want ErrInvalidFile", err)
	}
	for _, want := range []string{
		"tool 1 (a): composite: list at least one sub-tool",
		"tool 2 (b): composite: it cannot list itself",
		`tool 2 (b): composite: sub-tool "x" is listed twice`,
		`tool 2 (b): composite: sub-tool name "bad name" must match`,
		`tool 3 (c): field "command" does not belong in a composite`,
		`tool 3 (c): field "parameters" does not belong in a composite`,
		`tool 4 (d): composite: json: unknown field "colour"`,
		"tool 5 (e): composite: it reaches itself",
		"tool 6 (f): callbacks.beforeCall.cache: ttl is required",
		`tool 6 (f): callbacks.beforeCall.cache: key "q": a JSON pointer starts with /`,
		`tool 6 (f): callbacks.beforeCall.cache: bucket "a.b"`,
		"tool 6 (f): callbacks.onSuccess: set exactly one of service, pointer and template",
		"tool 6 (f): callbacks.onError.service",
		"tool 6 (f): callbacks.formatOutput: template:",
		`tool 9 (i): callbacks: json: unknown field "before"`,
		"tool 7 (g): retry.when.message is not an RE2 regular expression",
		`tool 8 (h): retry: json: unknown field "retryIf"`,
		"mcpServers 1 (m): callbacks.onSuccess: set exactly one of service, pointer and template (tool add)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// A composite cut short by its executor's shutdown (its grace period over) is handed
// back, not ended: it leaves its sub-call waiting for the approval, and runs again on
// another replica, which awaits the same sub-call; the owner's approval completes both.
// (A composite call that ends — canceled, or out of time — cancels the sub-call it
// waits for: plannerapi's TestAnEndedCompositeCancelsItsSubCall.)
func TestCompositeHandedBackAtShutdownKeepsItsSubCall(t *testing.T) {
	path := writeFile(t, "tools.yaml", `
tools:
  - name: batch
    safe: true
    composite: {tools: [risky]}
`)
	fx := natstest.StartJetStream(t, events.Config{})
	var ran atomic.Int32
	risky := tools.NewRegistry()
	if err := risky.AddFunc(tools.Definition{Name: "risky", Description: "Needs an approval.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return "done", nil }); err != nil {
		t.Fatal(err)
	}
	runExecutor(t, fx, risky, "risky")
	reg := startFile(t, path)
	first, err := executor.New(fx.Srv.Connect(), reg, executor.WithGracePeriod(0), executor.WithExecutorID("first"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-first.Ready()

	owner := events.Identity{Tenant: "acme", Role: "admin"}
	c, err := client.New(fx.NC, client.WithIdentity(owner))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if _, err := c.Submit(bg, client.Request{Tool: "batch", ID: "batch-1", RunID: "run-b",
		Arguments: json.RawMessage(`{"calls":[{"name":"risky","args":{}}]}`)}, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sub := toolsfile.SubCallID("batch-1", 0)
	natstest.Eventually(t, 20*time.Second, "the sub-call's approval request", func() bool {
		_, _, pending, err := c.PendingApproval(bg, "risky", sub)
		return err == nil && pending
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Run has returned, so has the composite's attempt: it published no cancel (which it
	// would send as its caller).
	subject, err := events.CancelSubject(owner, "risky", sub)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := fx.JS.Stream(bg, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.GetLastMsgForSubject(bg, subject); err == nil {
		t.Fatalf("the composite cut short by the shutdown canceled its sub-call: %s", m.Data)
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}

	runExecutor(t, fx, reg, "second")
	if err := c.Answer(bg, "risky", sub, events.ApprovalAnswer{Decision: events.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	var res events.Result
	natstest.Eventually(t, 20*time.Second, "the composite's result", func() bool {
		var found bool
		res, found, err = c.StoredResult(bg, "run-b", "batch-1")
		return err == nil && found
	})
	if res.Status != events.StatusOK || !strings.Contains(string(res.Output), `"done"`) || ran.Load() != 1 {
		t.Fatalf("the composite run again: %s %s, risky ran %d times", res.Status, res.Output, ran.Load())
	}
}
